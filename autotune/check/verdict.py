"""Does the rate hold? A pure decision on a check's run figures against the stored one.

A regression fails the gate only when the runs agree on it: the 95% interval of the ratio
(median / stored) lies below 1 - threshold, or every run is below it. One slow run of three on a
busy machine does not fail a build; three runs that all read 15% slow do. The defaults follow
*AI Systems Performance Engineering* (ch. 13): "a 5% regression sustained over 3 runs before
failing the build".
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Sequence
from typing import Any

from autotune.contract.fmt import human
from autotune.contract.stats import median_uncertainty, relative_spread

__all__ = ["ExitCode", "State", "Verdict", "judge"]


class ExitCode(enum.IntEnum):
    """What `autotune check` exits with."""

    OK = 0
    """The rate holds (or the runs disagree too much to call a regression)."""
    REGRESSION = 1
    """Slower than the stored figure by more than the threshold, in runs that agree."""
    CANNOT_COMPARE = 2
    """Another device, torch version or unit, bad input, or no run finished ok."""


class State(enum.Enum):
    """What the runs say of the rate."""

    OK = "ok"
    """Within the threshold of the stored figure."""
    FASTER = "faster"
    """Above 1 + threshold in runs that agree: time for `--update`."""
    NOISY = "noisy"
    """Below 1 - threshold, but the runs do not agree on it: not failed, said so."""
    REGRESSION = "regression"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """The decision on some runs against the stored figure."""

    state: State
    runs: tuple[float, ...]
    """The ok runs' rates."""
    stored: float
    """The baseline's units/s."""
    threshold: float
    median: float
    """The runs' median, units/s."""
    ratio: float
    """median / stored."""
    interval: tuple[float, float]
    """95% interval of the ratio (the median's, `stats.median_uncertainty`; the stored figure
    taken as exact); unbounded above for a single run."""
    spread: float
    """(max - min) / median of the runs; 0 for one run."""

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.REGRESSION if self.state is State.REGRESSION else ExitCode.OK

    def line(self, unit: str) -> str:
        """The one line for people: `ok: 418k tokens/s, 1.00x the stored 420k (3 runs, spread
        0.4%)`, and why a regression was or was not called. "Stored": the figure checked
        against (best.yaml's throughput), not best.yaml's `baseline`, PyTorch's defaults."""
        n = len(self.runs)
        head = (f"{self.state.value}: {human(self.median)} {unit}/s, {self.ratio:.2f}x the "
                f"stored {human(self.stored)} ({n} run{'s' if n != 1 else ''}, spread "
                f"{self.spread:.1%})")
        limit = 1 - self.threshold
        if self.state is State.REGRESSION:
            every = all(r / self.stored < limit for r in self.runs)
            why = (f"every run below {limit:.2f}x" if every else
                   f"95% interval {self.interval[0]:.2f}-{self.interval[1]:.2f}x")
            return f"{head}: slower by more than {self.threshold:.0%} ({why})"
        if self.state is State.NOISY:
            return (f"{head}: below {limit:.2f}x, but the runs do not agree on it (95% interval "
                    f"{self.interval[0]:.2f}-{_high(self.interval[1])}x): not called a regression")
        if self.state is State.FASTER:
            return f"{head}: faster by more than {self.threshold:.0%}; --update to keep it"
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state.value, "exit_code": int(self.exit_code),
                "runs": list(self.runs), "median": self.median, "baseline": self.stored,
                "ratio": self.ratio,
                "interval": [self.interval[0], _finite(self.interval[1])],
                "threshold": self.threshold, "spread": self.spread}


def _high(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "inf"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no infinity


def judge(runs: Sequence[float], stored: float, *, threshold: float) -> Verdict:
    """The verdict on the rates of some ok runs against `stored` (units/s)."""
    if not runs or any(not (math.isfinite(r) and r > 0) for r in runs):
        raise ValueError(f"need positive, finite run rates, got {runs=}")
    if not (math.isfinite(stored) and stored > 0) or not 0 < threshold < 1:
        raise ValueError(f"need a positive stored rate and a threshold in (0, 1), got "
                         f"{stored=}, {threshold=}")
    median = statistics.median(runs)
    ratio = median / stored
    half = median_uncertainty(runs)  # relative to the median; infinite for one run
    interval = (max(0.0, ratio * (1 - half)), ratio * (1 + half))
    ratios = [r / stored for r in runs]
    low, high = 1 - threshold, 1 + threshold
    if ratio < low:
        agreed = interval[1] < low or all(r < low for r in ratios)
        state = State.REGRESSION if agreed else State.NOISY
    elif ratio > high and (interval[0] > high or all(r > high for r in ratios)):
        state = State.FASTER
    else:
        state = State.OK
    return Verdict(state=state, runs=tuple(runs), stored=stored, threshold=threshold,
                   median=median, ratio=ratio, interval=interval,
                   spread=relative_spread(runs) if len(runs) > 1 else 0.0)
