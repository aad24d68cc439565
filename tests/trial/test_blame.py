"""The loss contract's error names the usual slip and its fix."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from autotune.trial.blame import check_loss


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
