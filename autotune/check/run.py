"""Run a check: the stored config in fresh processes, as a confirmation run measures it (the
study's `SubprocessRunner`, a confirmation's measurement), then the verdict (`verdict.judge`).

Nothing is written but `--update`'s baseline file: the runs' folders live in a temporary folder
that goes with the check, and an interrupted check writes nothing at all.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.check.baseline import Baseline, incomparable, read_baseline, write_baseline
from autotune.check.verdict import ExitCode, State, Verdict, judge
from autotune.contract.errors import InputError
from autotune.contract.fmt import human
from autotune.contract.noise import likely_cause, spread_warning
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Fingerprint, Status, TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.confirmation.lead import DISAGREE, disagreement
from autotune.study.execution.protocol import Runner
from autotune.study.interrupts import on_signals

__all__ = ["CheckSettings", "Outcome", "noise_notes", "run_check"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckSettings:
    """What `autotune check` is asked (its flags)."""

    adapter: Path
    """The adapter file, as the change under test left it."""
    against: Path
    """best.yaml, or a baseline file."""
    measure: MeasureSettings
    """How each run is timed (a confirmation run's settings)."""
    runs: int = 3
    """Fresh runs of the config."""
    threshold: float = 0.05
    """A regression is a median below 1 - threshold of the stored figure."""
    run_timeout: float = 300.0
    """Seconds one run may take, start-up and compile included."""
    allow_torch_change: bool = False
    update: Path | None = None
    """Write this machine's runs here as the baseline instead of comparing."""

    def __post_init__(self) -> None:
        if self.runs < 1 or not 0 < self.threshold < 1 or self.run_timeout <= 0:
            raise ValueError(f"need runs >= 1, a threshold in (0, 1) and a positive timeout, "
                             f"got {self.runs=}, {self.threshold=}, {self.run_timeout=}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a check ends with: its exit code, the line for people, the notes under it, and the
    same for CI (`to_dict`)."""

    code: int
    """The exit code (`verdict.ExitCode`, or 128 + the signal that interrupted the check)."""
    line: str
    """`ok: ...`, `regression: ...`, `cannot check: <reason>`, ..."""
    notes: tuple[str, ...] = ()
    """Under the line: the runs' noise, failed runs, caveats of the stored figure."""
    verdict: Verdict | None = None
    """None when nothing was compared (exit 2, an interrupt, --update)."""
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Unit, device, torch, the runs' statuses: for --json."""

    def to_dict(self) -> dict[str, Any]:
        state = self.verdict.state.value if self.verdict is not None else (
            "updated" if self.code == 0 else "interrupted" if self.code > 2 else "cannot-compare")
        return {**(self.verdict.to_dict() if self.verdict is not None else {}), "state": state,
                "exit_code": self.code, "line": self.line, "notes": list(self.notes),
                **self.facts}


def _cannot(reason: str, **facts: Any) -> Outcome:
    return Outcome(code=ExitCode.CANNOT_COMPARE, line=f"cannot check: {reason}", facts=facts)


def run_check(settings: CheckSettings, *, runner: Runner | None = None,
              progress: Callable[[str], None] = lambda text: None) -> Outcome:
    """Read the baseline, run its config `settings.runs` times, and judge (or write the
    baseline, with `update`). `runner`: the study's `SubprocessRunner` unless given (tests)."""
    try:
        baseline = read_baseline(settings.against)
        unit = _adapter_unit(settings.adapter, baseline, settings.against)
    except InputError as exc:
        return _cannot(str(exc))
    problem = _preflight(settings, baseline, unit)
    if problem is not None:
        return _cannot(problem)
    with tempfile.TemporaryDirectory(prefix="autotune-check-") as tmp:
        if runner is None:
            runner = _fresh_runner(baseline, Path(tmp) / "compile-cache")
        try:
            return _measure_and_judge(settings, baseline, unit, runner, Path(tmp), progress)
        finally:
            runner.close()


def _here(device_kind: str) -> Fingerprint:
    """This machine's facts: the runs use this interpreter, so its torch and devices are
    theirs (a baseline file records these, and a check compares these)."""
    from autotune.trial.fingerprint import fingerprint

    return fingerprint(device_kind)


def _preflight(settings: CheckSettings, baseline: Baseline, unit: str) -> str | None:
    """Why this machine cannot run or compare the baseline, before any run; None when it can."""
    import torch  # the adapter imported it already

    if baseline.device_kind == "cuda" and not torch.cuda.is_available():
        return f"{settings.against} was tuned on CUDA and no CUDA device is visible here"
    if settings.update is not None:
        if not settings.update.parent.is_dir():  # found before the runs, not after
            return f"--update {settings.update}: no folder {settings.update.parent} to write it in"
        return None  # this machine's baseline is being written: nothing to compare yet
    return incomparable(baseline, unit=unit, fingerprint=_here(baseline.device_kind),
                        allow_torch_change=settings.allow_torch_change)


def _measure_and_judge(settings: CheckSettings, baseline: Baseline, unit: str, runner: Runner,
                       tmp: Path, progress: Callable[[str], None]) -> Outcome:
    signalled: list[int] = []

    def stop(signum: int) -> None:
        signalled.append(signum)
        runner.interrupt("the check was interrupted")

    results: list[TrialResult] = []
    with on_signals(stop):
        for i in range(settings.runs):
            if signalled:
                break
            request = TrialRequest(adapter=str(settings.adapter), config=baseline.config,
                                   device=baseline.device_kind, measure=settings.measure,
                                   number=i, diagnose=False)
            result = runner.run(request, tmp / f"run{i + 1}", timeout=settings.run_timeout)
            results.append(result)
            if result.status is Status.INTERRUPTED:
                signalled.append(signalled[0] if signalled else 2)  # SIGINT's number
                break
            progress(_run_line(i, settings.runs, result, unit))
    if signalled:
        return Outcome(code=128 + signalled[0], line="interrupted: nothing written")
    return _conclude(settings, baseline, unit, results)


def _conclude(settings: CheckSettings, baseline: Baseline, unit: str,
              results: list[TrialResult]) -> Outcome:
    ok = [r for r in results if r.status is Status.OK and r.throughput]
    failed = [f"run {i + 1}: {r.status.value}: {r.reason}" for i, r in enumerate(results)
              if r not in ok]
    first = next((r.fingerprint for r in results if r.fingerprint is not None), None)
    facts = {"unit": f"{unit}/s", "against": str(settings.against),
             "adapter": str(settings.adapter), "statuses": [r.status.value for r in results],
             "device": first.device if first else None, "torch": first.torch if first else None}
    if not ok:  # the runs' folders go with the check: their log's end is shown here
        tail = _log_tail(results[0])
        return dataclasses.replace(_cannot(f"no run finished ok ({failed[0]})", **facts),
                                   notes=(*failed[1:], *([f"run 1's log ends:\n{tail}"]
                                                          if tail else [])))
    rates = [float(r.throughput or 0.0) for r in ok]
    if settings.update is not None:
        return _update(settings, baseline, unit, ok, rates, facts, failed)
    if failed:  # a config that no longer runs every time has regressed, whatever the rest read
        return Outcome(code=ExitCode.REGRESSION,
                       line=f"failed: {len(failed)} of {len(results)} runs did not finish ok "
                            f"({failed[0]})", notes=tuple(failed[1:]), facts=facts)
    verdict = judge(rates, baseline.throughput, threshold=settings.threshold)
    notes = [*noise_notes(verdict, ok, unit), *failed]
    if baseline.how and "confirmation" not in baseline.how and "fresh" not in baseline.how:
        notes.append(f"the stored figure is {baseline.how}, not fresh runs: --update writes a "
                     "sturdier baseline")
    if first is not None and baseline.cpus_available not in (None, first.cpus_available):
        notes.append(f"the baseline ran with {baseline.cpus_available} CPUs available, these "
                     f"runs with {first.cpus_available}")
    return Outcome(code=verdict.exit_code, line=verdict.line(unit), notes=tuple(notes),
                   verdict=verdict, facts=facts)


def _update(settings: CheckSettings, baseline: Baseline, unit: str, ok: list[TrialResult],
            rates: list[float], facts: dict[str, Any], failed: list[str]) -> Outcome:
    """Write the runs as this machine's baseline."""
    assert settings.update is not None  # only called with --update
    warning = spread_warning(ok, unit=unit)
    if disagreement(rates) >= DISAGREE:  # a baseline later checks would pass or fail by luck
        return dataclasses.replace(
            _cannot(f"--update: the runs contradict each other ({human(min(rates))} to "
                    f"{human(max(rates))} {unit}/s): nothing written; run it on a quiet "
                    "machine", **facts), notes=tuple(n for n in (warning, *failed) if n))
    median = statistics.median(rates)
    try:
        write_baseline(settings.update, config=baseline.config, runs=rates, unit=unit,
                       median=median, fingerprint=_here(baseline.device_kind),
                       device_kind=baseline.device_kind, nproc_per_node=baseline.nproc_per_node,
                       adapter=settings.adapter, source=settings.against)
    except OSError as exc:
        return _cannot(f"--update {settings.update}: cannot write it ({exc.strerror})", **facts)
    spread = relative_spread(rates) if len(rates) > 1 else 0.0
    return Outcome(code=ExitCode.OK, facts=facts,
                   line=f"wrote {settings.update}: {human(median)} {unit}/s, the median of "
                        f"{len(rates)} run(s) on this machine (spread {spread:.1%})",
                   notes=tuple(n for n in (warning, *failed) if n))


def noise_notes(verdict: Verdict, runs: list[TrialResult], unit: str) -> list[str]:
    """What the runs' own measurements say about their noise: the tool's spread warning when
    they disagree, and for a slowdown the runs did not agree on, the likely cause."""
    warning = spread_warning(runs, unit=unit)
    if warning is not None:
        return [warning]
    if verdict.state is State.NOISY:
        cause = likely_cause(runs)
        return [f"likely cause: {cause}" if cause else
                "nothing measured explains it; more --runs would narrow the interval"]
    return []


def _run_line(i: int, n: int, result: TrialResult, unit: str) -> str:
    if result.status is Status.OK and result.throughput:
        return f"run {i + 1}/{n}: {human(result.throughput)} {unit}/s"
    return f"run {i + 1}/{n}: {result.status.value}: {result.reason}"


def _log_tail(result: TrialResult, lines: int = 15) -> str:
    try:
        text = Path(result.log).read_text(errors="replace") if result.log else ""
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _adapter_unit(path: Path, baseline: Baseline, against: Path) -> str:
    """The adapter's unit, once it declares every knob of the baseline's `params` (a knob
    renamed since the tuning failed inside the first run, with a traceback, 2026-11-28)."""
    from autotune.adapter import load_adapter  # imports the user's file, and torch

    adapter = load_adapter(path)
    unknown = sorted(set(baseline.config.params) - set(adapter.knobs))
    if unknown:
        raise InputError(
            f"{against}: params {unknown} are not knobs of {adapter.__name__} in {path} (its "
            f"knobs: {sorted(adapter.knobs)}); check the adapter it was tuned for, or tune "
            "again: autotune search --adapter " + str(path))
    return adapter.unit


def _fresh_runner(baseline: Baseline, cache: Path) -> Runner:
    """A fresh process per run, as a confirmation run; DDP ranks where the baseline had them."""
    from autotune.study.execution.ddp_runner import DDPRunner
    from autotune.study.execution.runner import SubprocessRunner

    if baseline.nproc_per_node > 1:
        return DDPRunner(nproc_per_node=baseline.nproc_per_node, cache_dir=cache)
    return SubprocessRunner(cache_dir=cache)
