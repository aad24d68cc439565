"""Errors that mean "the user's input is wrong": the CLI prints them and exits 1."""

from __future__ import annotations

__all__ = ["ContractError", "InputError"]


class InputError(Exception):
    """Bad input (a file, a key, a flag) found before any trial runs.

    The message names what is wrong and how to fix it; the CLI prints it as is, without a
    traceback.
    """


class ContractError(InputError):
    """The baseline trial failed in the adapter's own code (a method raised, the loss was not a
    scalar tensor, the collate function failed): no configuration can fix that, so the search
    stops instead of running the same failure again for every config."""

    @classmethod
    def in_baseline(cls, number: int, *, part: str, reason: str, log: str) -> ContractError:
        """The error for baseline trial `number` failing in the adapter's `part`."""
        where = f"\n  log: {log}" if log else ""
        return cls(
            f"the baseline trial (#{number}, PyTorch's defaults) failed in the adapter's {part}, "
            f"which breaks the adapter contract:\n  {reason}{where}\n"
            "No configuration can fix an error in the adapter's own code, so the search "
            "stopped. Fix the adapter (see autotune.Adapter: loss(model, batch) returns a "
            "scalar tensor, ...) and run the same command again: the baseline runs again."
        )
