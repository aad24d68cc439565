"""What the subcommands share: the parser class, argument types, the device and the output folder."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import NoReturn

from autotune.contract.errors import InputError


class Parser(argparse.ArgumentParser):
    """Usage errors exit 1 (the project's convention for bad input) with the short usage line,
    the error and where the whole help is."""

    usage_status: int = 1
    """The exit status of a usage error (`autotune check` sets 2: a bad flag is no regression)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists every option)\n")


def positive(kind: type) -> object:
    """An argparse type: a finite number of `kind` above 0."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**32:  # numpy's and Optuna's seed range
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**32 - 1, got {text}")
    return value


def trial_timeout(given: float | None, budget: float | None) -> float:
    """The time one trial may take: the given one, else bounded by the budget."""
    if given is not None:
        return given
    # max-autotune compiled GPT-2 small for 439 s on an H100 (torch 2.11) for no gain over
    # "default": one such trial must not silently take most of a short budget.
    return min(300.0, max(60.0, budget / 4)) if budget else 300.0


def resolve_device(choice: str) -> str:
    import torch

    available = torch.cuda.is_available()
    if choice == "cuda" and not available:
        raise InputError("--device cuda: no CUDA device is visible to PyTorch; use --device cpu")
    if choice == "auto":
        return "cuda" if available else "cpu"
    return choice


def check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".autotune-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"--out {out}: cannot write there ({exc.strerror}); pick a folder you can write to"
        ) from None
