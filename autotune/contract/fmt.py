"""Small formatting helpers shared by the trial's diagnosis and the outputs."""

from __future__ import annotations

__all__ = ["human", "rounded"]


def human(value: float | None) -> str:
    """12345.6 -> "12.3k"."""
    if value is None:
        return "-"
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def rounded(value: float | None, digits: int = 4) -> float | None:
    """A figure for a file a person reads: `digits` significant digits, one decimal from 10k."""
    if value is None:
        return None
    return float(f"{value:.{digits}g}") if abs(value) < 1e4 else round(value, 1)
