"""Whether timed windows are still warming up: their rate still climbing when the budget ends.

An eager bf16 BERT on sequences padded per batch (transformers, H100, torch 2.11, 2026-11-27)
sped up from 105-ms to 66-ms steps over its first ~200 steps (not profiled: most likely each
new sequence length paying once, for a kernel plan or an allocation); warm-up had called it
settled after 43 steps. Its search
trial's 5 s of windows read 61k-109k tokens/s (median 81k) while fresh runs timed for 20 s
settled at 131k-147k. A window set whose later half runs clearly faster than its earlier half
measured a warm-up: the earlier half is dropped and timing goes on, within `EXTEND` times the
budget.
"""

from __future__ import annotations

import statistics

__all__ = ["EXTEND", "RISE", "still_rising"]

RISE = 0.15
"""The later half's median this much above the earlier half's (or twice the tolerance, if
more) is a climb, not noise: the H100 grids' noisiest input-bound windows, 71% apart, do not
trend."""
EXTEND = 3.0
"""Timing may go on up to this many times the measuring budget while the rate climbs."""
MIN_WINDOWS = 6


def still_rising(rates: list[float], tolerance: float) -> bool:
    """Whether the later half of `rates` (window rates, oldest first) ran clearly faster than
    the earlier half, and the last window is not below the earlier half's median."""
    if len(rates) < MIN_WINDOWS:
        return False
    half = len(rates) // 2
    early = statistics.median(rates[:half])
    late = statistics.median(rates[half:])
    return late > (1 + max(RISE, 2 * tolerance)) * early and rates[-1] >= early
