"""The loss contract's error names the usual slip and its fix; an adapter error names its line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from autotune.trial.blame import check_loss, where_in


@dataclasses.dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


SCALAR = torch.tensor(1.0, requires_grad=True)


@pytest.mark.parametrize(("returned", "hint"), [
    (Output(SCALAR, torch.ones(2)), "got Output holding a scalar loss: return its .loss"),
    ({"loss": SCALAR}, 'got dict holding a scalar loss: return its ["loss"]'),
    ((SCALAR, torch.ones(2)), "got tuple whose first item is a scalar tensor"),
    (torch.ones(3), "got Tensor of shape (3,)"),
])
def test_a_loss_that_is_not_a_scalar_names_what_to_return(returned: Any, hint: str) -> None:
    with pytest.raises(TypeError) as excinfo:
        check_loss(returned)
    assert str(excinfo.value).startswith("adapter.loss must return a scalar tensor, ")
    assert hint in str(excinfo.value)


def test_a_scalar_without_grad_is_refused_and_a_scalar_loss_passes() -> None:
    with pytest.raises(TypeError, match="does not require grad"):
        check_loss(torch.tensor(1.0))
    check_loss(SCALAR)


def test_an_output_whose_loss_attribute_raises_gets_the_plain_error() -> None:
    class Strict:
        @property
        def loss(self) -> torch.Tensor:
            raise KeyError("loss")  # as a mapping-backed output without labels might

    with pytest.raises(TypeError, match=r"got Strict$"):
        check_loss(Strict())


def test_where_in_names_the_adapters_innermost_line(tmp_path: Path) -> None:
    # The console showed "failed in the adapter's dataset()" and the error, and the user's
    # line only in the trial's log (2026-11-28).
    adapter = tmp_path / "my_adapter.py"
    adapter.write_text("def helper():\n    raise RuntimeError('shard missing')\n\n"
                       "def dataset():\n    return helper()\n")
    namespace: dict[str, Any] = {}
    exec(compile(adapter.read_text(), str(adapter), "exec"), namespace)
    with pytest.raises(RuntimeError) as err:
        namespace["dataset"]()
    assert where_in(err.value, str(adapter)) == "my_adapter.py, line 2, in helper"
    assert where_in(err.value, str(tmp_path / "other.py")) == ""
    # A DataLoader worker's error carries the worker's traceback as text in its message.
    wrapped = ValueError('Caught ValueError in DataLoader worker process 0.\nOriginal '
                         f'Traceback (most recent call last):\n  File "{adapter}", line 9, in '
                         '__getitem__\n    x = bad\nValueError: bad sample')
    assert where_in(wrapped, str(adapter)) == "my_adapter.py, line 9, in __getitem__"
