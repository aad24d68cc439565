"""Errors that mean "the user's input is wrong": the CLI prints them and exits 1."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """Bad input (a file, a key, a flag) found before any trial runs.

    The message names what is wrong and how to fix it; the CLI prints it as is, without a
    traceback.
    """
