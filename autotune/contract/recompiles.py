"""Why a compiled step compiled again after its first step, in words: Dynamo's guard failures.

With dynamic shapes a graph still holds guards on its sizes, and some are divisibility tests a
kernel's alignment asks for. A transformers T5-small padded per batch, bf16, compiled with
dynamic shapes, recompiled on `(input_ids.size()[1] % 16) != 0` (the memory-efficient attention
backward's meta function) and on `% 8` (Inductor's aligned tensors): a length that flipped
one of these tests compiled again, 37-122 s each, and the trial was killed still warming up after 254 s
(H100, torch 2.11, 2026-11-28, `results/h100/heldout/hf_t5/bf16-compile/`). Lengths padded to a
multiple of the divisor keep those guards true, and the compile stops recompiling on them.
"""

from __future__ import annotations

import math
import re

__all__ = ["MAX_REASON_CHARS", "SEPARATOR", "divisor", "recompile_note", "short_reason"]

MAX_REASON_CHARS = 200
"""A reason is cut to this many characters: Dynamo's guards can name long expressions."""

_FRAME = re.compile(r"^\s*\d+/\d+:\s*")  # "9/1: " (Dynamo's frame and its compile)
_WHERE = re.compile(r"([^\s(]+):(\d+) in (\w+)")  # "_meta_registrations.py:6232 in meta_..."
_MODULUS = re.compile(r"%\s*(\d+)\s*\)")  # "(x.size()[1] % 16)"
_MAX_DIVISOR = 1024

SEPARATOR = "; "
"""Between a trial's guards where they are kept as one text (`TrialResult.recompile_reason`,
`RecompileEvent.reasons`), the latest last."""


def short_reason(raw: str) -> str:
    """Dynamo's first guard failure of a recompile, without its frame number, with where the
    guard was made: `(input_ids.size()[1] % 16) != 0 (_meta_registrations.py:6232 in
    meta__scaled_dot_product_efficient_backward)`; the first place outside Dynamo's own files
    where it names several (a guard from the user's code names Dynamo's `evaluate_expr` too).
    "" for an empty reason."""
    lines = [line for line in raw.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    guard, _, where = _FRAME.sub("", lines[0]).partition("#")
    places = _WHERE.findall(where)
    outside = [p for p in places if "_dynamo/" not in p[0]]
    made = (outside or places)[0] if places else None
    text = guard.strip() + (
        f" ({made[0].rsplit('/', 1)[-1]}:{made[1]} in {made[2]})" if made else "")
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


def divisor(reasons: str) -> int | None:
    """The multiple that would keep every divisibility guard among `reasons` (guards joined by
    SEPARATOR) true: the least common multiple of their moduli (None when no guard tests
    divisibility, or past 1024)."""
    moduli = [int(m) for m in _MODULUS.findall(reasons)]
    moduli = [m for m in moduli if 1 < m <= _MAX_DIVISOR]
    if not moduli:
        return None
    multiple = math.lcm(*moduli)
    return multiple if multiple <= _MAX_DIVISOR else None


def recompile_note(count: int | None, seconds: float | None, reasons: str) -> str:
    """One sentence on a trial's recompiles after its first step: how many, how long, the last
    guard that failed (`reasons`: guards joined by SEPARATOR, the latest last), and the padding
    that would stop them where the guards test divisibility. "" when nothing recompiled."""
    if not count and not reasons:
        return ""
    reason, multiple = reasons.split(SEPARATOR)[-1], divisor(reasons)
    done = ("recompiled" if not count else
            f"{count} recompile{'s' if count != 1 else ''} after the first step")
    took = f" ({seconds:.0f} s)" if seconds and seconds >= 0.5 else ""
    last = f", the last on {reason}" if reason else ""
    pad = (": its guards test the sizes' divisibility, so a size that flips such a test "
           f"compiles again; lengths padded to a multiple of {multiple} keep them true"
           if multiple else "")
    return f"{done}{took}{last}{pad}"
