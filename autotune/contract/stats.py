"""Statistics both sides use on rates."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["median_uncertainty", "relative_spread"]


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / median; infinite for no values or a median of 0."""
    if not values:
        return math.inf
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else math.inf


# Two-sided 95% Student t quantiles by degrees of freedom (any statistics table); beyond 30
# degrees of freedom the normal quantile 1.96 is close enough.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}


def _t95(dof: int) -> float:
    return next((_T95[k] for k in sorted(_T95) if k >= dof), 1.96)


def median_uncertainty(values: Sequence[float]) -> float:
    """Half-width of a 95% confidence interval of the median, relative to the median.

    The median of n normal samples has a standard error of sqrt(pi/2) = 1.2533 times the
    mean's (its asymptotic efficiency, 2/pi); with a t quantile for the few windows a trial
    times. Infinite below two values.
    """
    n = len(values)
    if n < 2:
        return math.inf
    mid = statistics.median(values)
    if mid <= 0:
        return math.inf
    return 1.2533 * _t95(n - 1) * statistics.stdev(values) / math.sqrt(n) / mid
