"""Errors that mean "the user's input is wrong": the CLI prints them and exits 1."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["ContractError", "InputError", "near_miss"]


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
            f"stopped. Fix the adapter ({_fix_for(reason) or ''}see autotune.Adapter: "
            f"{_contract_of(part)}) and run the same command again: the baseline runs again."
        )


_CONTRACTS = {
    "dataset()": "dataset() returns the dataset, map-style or iterable, built on the CPU",
    "model()": "model() returns a fresh nn.Module, on the CPU",
    "optimizer(model)": "optimizer(model) returns a torch.optim.Optimizer over the parameters "
                        "of the model it is handed",
    "loss(model, batch)": "loss(model, batch) returns a scalar tensor",
    "items(batch)": "items(batch) returns how many units the batch holds",
    "loader": "the dataset's items and the collate function run in the DataLoader's workers",
    "make_loader": "make_loader(dataset, **knobs) returns an iterable of batches",
    "blocks(model)": "blocks(model) returns the model's repeated submodules, for checkpointing",
}


def _contract_of(part: str) -> str:
    """What the adapter's `part` (as `trial.blame` names it) must do, for the error's hint."""
    return next((said for name, said in _CONTRACTS.items() if part.startswith(name)),
                "its methods' docstrings say what each returns")


_FIXES = (
    # NumPy arrays are float64 unless told otherwise; torch.as_tensor keeps that, and a float32
    # model then fails in its first layer (a held-out adapter, 2-CPU VM, 2026-11-28). The
    # messages are torch 2.13's for Linear, Conv2d and LSTM.
    (re.compile(r"Double and Float|Float and Double|Input type \(double\)|dtype \(torch\.float64\) "
                r"does not match|found dtype Double|expected scalar type Float but found Double",
                re.IGNORECASE),
     "the batch holds float64 tensors, NumPy's default, and the model float32: make them "
     "float32 in dataset() or the collate function (np.float32, or torch.as_tensor(x, "
     "dtype=torch.float32))"),
    (re.compile(r"expected target dtype to be Long|expected scalar type Long but found",
                re.IGNORECASE),
     "class targets must be int64: make them torch.long in dataset() or the collate function"),
    # The default collate leaves strings as a list of str (a held-out adapter's dict items with
    # text and no collate_fn, 2-CPU VM, 2026-11-28: "'list' object has no attribute 'size'").
    (re.compile(r"'(list|str|tuple)' object has no attribute '(size|shape|dim|to|float|long|"
                r"view|unsqueeze|numel)'|must be Tensor, not (list|str)|"
                r"expected Tensor as element \d+ in argument \d+, but got (list|str)"),
     "a value of the batch is a Python list or str, not a tensor (the default collate leaves "
     "strings as lists of str): tokenize or convert it in a collate_fn (loader_args) or in "
     "dataset()"),
)


def _fix_for(reason: str) -> str:
    """A fix for a common failure, said from the error's own text ("" when none), ended with
    "; " to go before the contract's hint."""
    return next((f"{fix}; " for pattern, fix in _FIXES if pattern.search(reason)), "")


def near_miss(names: Sequence[str], missing: Sequence[str]) -> str:
    """The hint ' (it defines `los`: a typo of `loss`?)' for each of `names` close to a
    `missing` one (dunder names aside), or ""."""
    own = [n for n in names if not n.startswith("__")]
    return "".join(f" (it defines `{near[0]}`: a typo of `{name}`?)" for name in missing
                   if (near := difflib.get_close_matches(name, own, n=1, cutoff=0.6)))
