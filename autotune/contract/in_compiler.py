"""Where in torch.compile's own code a trial's error was raised, noted in its reason.

The trial (`trial.worker`) notes the innermost frame of an error raised in Dynamo, AOTAutograd,
FX or Inductor: a held-out speech model's compile failed with "InductorError: AssertionError:"
and no message, which said neither where nor whose (H200, 2026-11-28). The search reads the
note back (`study.policy.compiler_error`): that graph is compiled in no other mode.
"""

from __future__ import annotations

import re

__all__ = ["RAISED_IN_COMPILER", "compiler_file", "compiler_note"]

RAISED_IN_COMPILER = "raised in torch.compile's own code"
"""What the note says: " (RAISED_IN_COMPILER: FILE:LINE in FUNC)", FILE as "torch/_inductor/..."."""

_NOTE = re.compile(re.escape(RAISED_IN_COMPILER) + r": (\S+):\d+ in ")


def compiler_note(file: str, line: int, function: str) -> str:
    """The note for an error raised at `file`:`line` in `function` of torch.compile's code."""
    return f" ({RAISED_IN_COMPILER}: {file}:{line} in {function})"


def compiler_file(reason: str) -> str | None:
    """The file of torch.compile's own code a reason's note names; None without a note."""
    found = _NOTE.search(reason)
    return None if found is None else found.group(1)
