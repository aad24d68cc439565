"""The study's picture: points computed here in pure functions, drawn by `draw.save_plot`
(optuna's way).

Four panels read from what the study stored: throughput against the search's wall-clock time
(what the budget bought), the confirmation re-runs with their spread, throughput against the
effective batch (batch_size x grad_accum) with dtype and compile told apart, and peak memory
against the micro-batch. Rows are `trial_rows` dicts or trials.csv rows read back as text:
values are parsed here, so a committed CSV can be drawn again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.contract.result import NOT_RUN
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["Confirmed", "PlotData", "Point", "plot_data", "search_clock"]

DUPLICATE = "same config as trial"
"""How a trial row that copied an earlier trial's result begins its reason (table.py): it
measured nothing, so it is no point of its own."""
RESUME_GAP = 60.0
"""Seconds without a running trial taken as a break (a resumed study): the clock skips it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Point:
    """One trial of the search."""

    number: int
    status: str
    throughput: float | None
    """Units/s (a pruned trial's partial rate); None when it did not run."""
    seconds: float
    """Search wall-clock time at which the trial ended."""
    batch_size: int
    grad_accum: int
    amp_dtype: str
    compile: str
    peak_memory_gb: float | None
    baseline: bool

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.grad_accum


@dataclasses.dataclass(frozen=True, kw_only=True)
class Confirmed:
    """One config's fresh re-runs after the search."""

    trial: int
    runs: tuple[float, ...]
    median: float | None
    search: float
    baseline: bool
    winner: bool
    failed: int = 0
    """Runs that did not end ok (timeout, crash, ...)."""

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the runs; None with fewer than two."""
        if len(self.runs) < 2 or not self.median:
            return None
        return (max(self.runs) - min(self.runs)) / self.median


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlotData:
    unit: str
    points: tuple[Point, ...]
    """Every trial that ran or failed, by trial number (running ones and copies of an earlier
    trial's result left out)."""
    best_so_far: tuple[tuple[float, float], ...]
    """(seconds, best throughput of an ok trial so far), one per ok trial."""
    baseline: tuple[int, float] | None
    """(trial number, throughput) of the baseline."""
    winner: int | None
    """The trial number the study hands back (best.yaml's)."""
    confirmed: tuple[Confirmed, ...]
    resumes: tuple[float, ...] = ()
    """Search seconds at which the study was resumed after a break."""
    clock: str = "wall-clock"
    """"wall-clock" (from the study's trial times) or "trial durations" (summed, from a CSV)."""
    memory: str = "peak allocated"
    """What `peak_memory_gb` is: device memory in live tensors, or the host's resident set."""
    standing: str = ""
    """How sure the study is of its winner, as best.yaml says ("confidence low: tie within
    noise"); "" when not told."""
    copies: int = 0
    """Trials that copied an earlier trial's result (same config): counted, not drawn."""
    not_run: int = 0
    """Configs the search refused without running them (reason "not run: ..."): told to the
    study as a timeout, an OOM or an error, but nothing was measured. Counted, not drawn (they
    were drawn at 0 as timeouts, beside the trials cut at their limit)."""
    ratio_note: str | None = None
    """Why the ratio to the baseline is not confirmed, as best.yaml says; None: judged here
    from the baseline's confirmation runs."""

    @property
    def ok(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.status == "ok")


def search_clock(spans: Sequence[tuple[int, float, float]], *, max_gap: float = RESUME_GAP
                 ) -> tuple[dict[int, float], tuple[float, ...]]:
    """Search seconds at each trial's end from (number, start, end) timestamps, with breaks
    longer than `max_gap` between runs of the study skipped; also where the breaks were."""
    ends: dict[int, float] = {}
    resumes: list[float] = []
    clock = 0.0
    last: float | None = None  # wall time the clock has reached
    for number, start, end in sorted(spans, key=lambda s: s[1]):
        if last is None:
            last = start
        elif start - last > max_gap:
            resumes.append(clock)
            last = start
        if end > last:
            clock += end - last  # a short wait between trials is the search's time too
            last = end
        ends[number] = clock - (last - end)
    return ends, tuple(resumes)


def plot_data(rows: Sequence[Mapping[str, Any]], *, unit: str,
              confirmation: Sequence[ConfirmationEntry] | None = None,
              winner: int | None = None, ends: Mapping[int, float] | None = None,
              resumes: Sequence[float] = (), standing: str = "",
              ratio_note: str | None = None) -> PlotData:
    """The points of every panel. `ends`: search seconds at each trial's end (`search_clock`);
    without it, trial durations are summed in trial order. `winner`: the trial best.yaml names;
    `standing` and `ratio_note`: what best.yaml says of it and of its ratio to the baseline."""
    rows = sorted(rows, key=lambda r: int(r["number"]))
    points: list[Point] = []
    summed, copies, not_run = 0.0, 0, 0
    device_memory = any(_num(r.get("peak_allocated_mb")) for r in rows)
    for r in rows:
        status = str(r.get("status") or "")
        if status in ("", "running"):
            continue
        if str(r.get("reason") or "").startswith(DUPLICATE):
            copies += 1
            continue
        if str(r.get("reason") or "").startswith(NOT_RUN):
            not_run += 1
            continue
        summed += _num(r.get("duration_seconds")) or 0.0
        seconds = ends.get(int(r["number"])) if ends is not None else summed
        memory = _num(r.get("peak_allocated_mb" if device_memory else "peak_rss_mb"))
        points.append(Point(
            number=int(r["number"]), status=status,
            throughput=_num(r.get("throughput")) if status in ("ok", "pruned") else None,
            seconds=summed if seconds is None else seconds,
            batch_size=int(_num(r.get("batch_size")) or 0),
            grad_accum=int(_num(r.get("grad_accum")) or 1),
            amp_dtype=str(r.get("amp_dtype") or "?"), compile=str(r.get("compile") or "none"),
            peak_memory_gb=memory / 1024 if memory else None,
            baseline=_bool(r.get("baseline"))))
    best: list[tuple[float, float]] = []
    rated = [(p.seconds, p.throughput) for p in points if p.status == "ok" and p.throughput]
    for seconds, rate in sorted(rated, key=lambda sr: sr[0]):
        top = max(best[-1][1], rate) if best else rate
        best.append((seconds, top))
    base = next(((p.number, p.throughput) for p in points
                 if p.baseline and p.status == "ok" and p.throughput), None)
    confirmed = tuple(
        Confirmed(trial=c.trial, runs=tuple(c.throughputs), median=c.median,
                  search=c.search_throughput, baseline=c.baseline, winner=c.trial == winner,
                  failed=sum(1 for status in c.statuses if status != "ok"))
        for c in confirmation or ())
    return PlotData(unit=unit, points=tuple(points), best_so_far=tuple(best),
                    baseline=base, winner=winner, confirmed=confirmed, resumes=tuple(resumes),
                    clock="wall-clock" if ends is not None else "trial durations",
                    memory="peak allocated" if device_memory else "peak RSS (host)",
                    standing=standing, ratio_note=ratio_note, copies=copies, not_run=not_run)


def _num(value: Any) -> float | None:
    """A number from a row: a float, or CSV text ("" for none)."""
    if value is None or value == "":
        return None
    return float(value)


def _bool(value: Any) -> bool:
    return value is True or str(value).lower() == "true"
