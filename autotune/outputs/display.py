"""Live progress of a search with `rich`: trial i of N, current best, each finished trial.

In a terminal a status line stays live at the bottom, naming the running trial's phase. Piped
or logged (stdout not a terminal), output is plain lines that are never wrapped (rich would
wrap at 80 columns mid-phrase) and no live line.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from autotune.contract.config import TrainConfig
from autotune.contract.events import FirstStepEvent, PhaseEvent, TrialEvent, WindowEvent
from autotune.contract.fmt import human
from autotune.contract.noise import likely_cause, spread_warning
from autotune.contract.phases import Phase
from autotune.contract.result import Status, TrialResult
from autotune.outputs.best import conv_note
from autotune.outputs.decision import winner_phrases
from autotune.study.confirmation.candidate import Candidate
from autotune.study.confirmation.winner import Winner
from autotune.study.store.storage import shown

__all__ = ["QuietListener", "RichDisplay", "make_console"]

PLAIN_WIDTH = 160
"""Columns for tables when not in a terminal (lines themselves are never wrapped there)."""

# What the status line says a trial is doing in each phase (contract/phases.py).
_DOING = {Phase.START.value: "starting", Phase.IMPORT.value: "importing torch and the adapter",
          Phase.DEVICE.value: "starting the device",
          Phase.MODEL.value: "building the model", Phase.DATASET.value: "building the dataset "
          "and loader", Phase.FIRST_BATCH.value: "waiting for the first batch",
          Phase.WARMUP.value: "warming up", Phase.WINDOWS.value: "timing windows",
          Phase.DIAGNOSIS.value: "diagnosing: the loader alone, the model alone"}


def make_console(file: IO[str] | None = None) -> Console:
    """A console for `file` (stdout): rich's own in a terminal; elsewhere one that never wraps
    a line and draws tables wide enough for their rows."""
    console = Console(file=file)
    if console.is_terminal:
        return console
    return Console(file=file, soft_wrap=True, width=PLAIN_WIDTH)

_STYLE = {Status.OK: "green", Status.OOM: "red", Status.TIMEOUT: "yellow", Status.NAN: "magenta",
          Status.ERROR: "red", Status.CRASHED: "red", Status.INTERRUPTED: "yellow"}


class QuietListener:
    """Reports nothing (tests, library use)."""

    def started(self, settings: Any, done: int, unit: str) -> None: ...
    def trial_started(self, number: int, config: TrainConfig, limit: float) -> None: ...
    def trial_event(self, number: int, event: TrialEvent) -> None: ...
    def trial_finished(self, number: int, result: TrialResult, winner: Winner | None) -> None: ...
    def confirm_started(self, cands: list[Candidate], repeats: int) -> None: ...
    def confirm_result(self, cand: Candidate, result: TrialResult) -> None: ...
    def finished(self, winner: Winner | None, *, interrupted: bool = False) -> None: ...


@dataclasses.dataclass
class _Running:
    """A trial in progress, as its live line shows it."""

    text: str
    start: float
    phase: str
    phase_start: float
    compiling: bool
    windows: int = 0
    last_window: float | None = None


class RichDisplay:
    """A status line kept live at the bottom; one printed line per finished trial above it.
    Trials running side by side (one per GPU) get a live line each; their events arrive from
    the slots' threads, hence the lock."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or make_console()
        self.plain = not self.console.is_terminal
        """Piped or logged: no live status line."""
        self.live: Live | None = None
        self.start = time.monotonic()
        self.total = 0
        self.done = 0
        self.unit = "items"
        self.best: tuple[int, float] | None = None
        self.baseline: float | None = None
        self.running: dict[int, _Running] = {}
        self.configs: dict[int, str] = {}
        self._lock = threading.Lock()
        self.confirm_runs: dict[int, list[TrialResult]] = {}
        """Each confirmed trial's fresh runs, to warn when they disagree."""
        self.confirming = False
        """Whether the confirmation was announced (`confirm_started`)."""
        self.memory_formats: Sequence[str] | None = None
        """The space's memory_format values (set by the CLI): the first trial that shows
        convolutions a space without channels_last leaves out says so at once, not after the
        search (`best.conv_note`)."""

    def __rich__(self) -> Text:
        elapsed = _clock(time.monotonic() - self.start)
        # With a budget and no --trials the count is unbounded: the budget is the limit shown.
        of = f"/{self.total}" if self.total < 100_000 else ""
        text = Text(f"trial {min(self.done + 1, self.total)}{of} · {elapsed}", style="bold")
        if self.best is not None:
            text.append(f" · best #{self.best[0]} {human(self.best[1])} {self.unit}/s")
            if self.baseline:
                text.append(f" ({self.best[1] / self.baseline:.2f}x baseline)")
        now = time.monotonic()
        with self._lock:
            running = [dataclasses.replace(t) for t in self.running.values()]
        for t in running:
            doing = _DOING.get(t.phase, t.phase)
            if t.phase == Phase.WARMUP and t.compiling:
                doing = "compiling (the first step)"
            elif t.phase == Phase.WINDOWS and t.windows:
                doing = f"window {t.windows}: {human(t.last_window)}/s"
            text.append(f"\n  running {t.text} [{t.phase} {now - t.phase_start:.0f} s: "
                        f"{doing}; trial {now - t.start:.0f} s]", style="dim")
        return text

    def started(self, settings: Any, done: int, unit: str) -> None:
        self.total = settings.trials
        self.done = done
        self.unit = unit
        self.console.print(
            f"[bold]autotune search[/] adapter={settings.adapter} device={settings.device} "
            f"study={settings.study_name!r} ({done} trial(s) done before)\n"
            f"  outputs in {settings.out}/ · storage {shown(settings.storage)}"
        )
        if not self.plain:
            self.live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def trial_started(self, number: int, config: TrainConfig, limit: float) -> None:
        now = time.monotonic()
        with self._lock:
            self.configs[number] = config.describe()
            self.running[number] = _Running(
                text=f"#{number} {config.describe()} (limit {limit:.0f} s)", start=now,
                phase=Phase.START.value, phase_start=now, compiling=config.compile != "none")

    def trial_event(self, number: int, event: TrialEvent) -> None:
        with self._lock:
            t = self.running.get(number)
            if t is None:
                return
            if isinstance(event, PhaseEvent) and event.phase:
                t.phase = event.phase
                t.phase_start = time.monotonic()
            elif isinstance(event, FirstStepEvent):  # compiling happens in the first step
                t.compiling = False
            elif isinstance(event, WindowEvent):
                t.windows += 1
                t.last_window = event.throughput

    def trial_finished(self, number: int, result: TrialResult, winner: Winner | None) -> None:
        self.done += 1
        baseline = winner.baseline if winner else None
        self.baseline = baseline
        if winner is not None:
            self.best = (winner.record.number, winner.throughput)
        status = result.status
        line = Text(f"#{number:<3} ")
        line.append(f"{status.value:<12}", style=_STYLE.get(status, ""))  # "interrupted" + 1
        with self._lock:
            self.running.pop(number, None)
            config = self.configs.pop(number, "")
        if status is Status.OK:
            speed = f" {result.throughput / baseline:.2f}x" if baseline and result.throughput else ""
            cause = likely_cause([result])
            # Converged beside other work is a steady reading of a slowed step (a held-out
            # user's baseline: 125 images/s beside a pytest holding a core, 3.6k fresh).
            if result.converged:
                conv = f" (measured while {cause})" if cause else ""
            else:
                conv = f" (not converged{': likely ' + cause if cause else ''})"
            if result.rising_windows:
                conv += f" (still climbing: {result.rising_windows} early window(s) dropped)"
            if result.new_shape_windows:
                conv += (f" ({result.new_shape_windows} window(s) of new shapes: first runs' "
                         "cost left out)")
            if result.compiled_graphs == 0:  # the model ran eagerly under its compile
                conv += " (its compile compiled no graph: it ran eagerly)"
            if result.diagnosis_error:
                conv += f" (not diagnosed: {result.diagnosis_error})"
            # An eager config's first step pays no compile: cuDNN's benchmark, lazy set-up.
            first = "compile" if "compile=" in config else "first step"
            compile_s = f", {first} {result.compile_seconds:.0f} s" if result.compile_seconds and \
                result.compile_seconds >= 1 else ""
            cost = f"({result.reason})" if result.reason else \
                f"[{result.duration_seconds or 0:.0f} s{compile_s}]"
            line.append(f"{human(result.throughput):>7} {result.unit}/s{speed}{conv}  {config}  {cost}")
        else:
            line.append(f"{config}  {result.reason}")
        self.console.print(line)
        if result.conv_weights:
            with self._lock:  # trials on several GPUs end on their own threads: said once
                formats, self.memory_formats = self.memory_formats, None
            note = None if formats is None else conv_note(result, formats)
            if note is not None:
                self.console.print(f"[bold yellow]note:[/] {note}")

    def confirm_started(self, cands: list[Candidate], repeats: int) -> None:
        with self._lock:
            self.running.clear()
        self.confirming = True
        names = ", ".join(f"#{c.trial}" + (" (baseline)" if c.baseline else "") for c in cands)
        self.console.print(f"[bold]confirming[/] {names}: shuffled rounds of fresh runs until the "
                           f"lead is clear ({repeats} for the leader, one for a config behind)")
        self.confirm_runs = {}

    def confirm_result(self, cand: Candidate, result: TrialResult) -> None:
        self.confirm_runs.setdefault(cand.trial, []).append(result)
        value = (f"{human(result.throughput)} {self.unit}/s" if result.status is Status.OK
                 else f"{result.status.value} {result.reason}")
        self.console.print(f"  #{cand.trial:<3} {value}  (search measured "
                           f"{human(cand.search_throughput)})")

    def finished(self, winner: Winner | None, *, interrupted: bool = False) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        elapsed = _clock(time.monotonic() - self.start)
        if winner is None and interrupted:
            return  # stopped before a trial ended ok: the caller says it was interrupted
        if winner is None:
            self.console.print(f"[red]no trial ran ok[/] after {elapsed}; see the reasons above "
                               "and the logs under trials/<n>/log.txt")
            return
        if self.confirming and not self.confirm_runs and not interrupted:  # none started
            self.console.print("  no fresh run started: the search's budget (--timeout) had too "
                               "little time left for one")
        speed, how = winner_phrases(winner)  # a ratio is never "confirmed" on runs that disagree
        self.console.print(f"[bold green]best:[/] trial #{winner.record.number}, "
                           f"{human(winner.throughput)} {self.unit}/s{speed}{how} ({elapsed})")
        # Confirmed configs whose fresh runs disagree: say so, with the cause that was measured.
        for trial, runs in self.confirm_runs.items():
            warning = spread_warning(runs, unit=self.unit)
            if warning is not None:
                self.console.print(f"[bold yellow]warning:[/] trial #{trial}: {warning}")


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
