"""Statistics both sides use on rates."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["relative_spread"]


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / median; infinite for no values or a median of 0."""
    if not values:
        return math.inf
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else math.inf
