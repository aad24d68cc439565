"""Ctrl-C and SIGTERM during a search: stop the running trials, keep what finished."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Interrupted", "on_signals"]


class Interrupted(Exception):
    """The search was stopped by a signal; outputs for the finished trials are written."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def on_signals(stop: Callable[[int], None]) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call `stop(signum)` (which stops the running trials and
    their children, then the search) instead of raising; the handlers before are restored
    after. Outside the main thread, signals are left alone."""

    def handler(signum: int, frame: Any) -> None:
        stop(signum)

    try:
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
