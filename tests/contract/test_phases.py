"""The trial's phases, and how a timed-out trial says where it was stuck."""

from __future__ import annotations

import pytest

from autotune.contract.errors import ContractError, InputError
from autotune.contract.phases import PHASES, Phase, stalled


def test_phases_in_the_order_a_trial_goes_through_them() -> None:
    assert PHASES == ("start", "import", "device", "model", "dataset", "first_batch", "warmup",
                      "windows", "diagnosis")
    assert [p.value for p in Phase] == list(PHASES)


@pytest.mark.parametrize(
    ("phase", "kw", "says"),
    [
        (Phase.FIRST_BATCH, {}, "no batch from the DataLoader after 55 s"),
        (Phase.WARMUP, {"compiling": True}, "still compiling after 55 s (the first step had "
                                            "not finished)"),
        ("warmup", {"compiling": True, "stepped": True}, "still warming up after 55 s (step "
                                                        "times had not settled)"),
        ("windows", {"windows": 2}, "still measuring after 55 s (2 timed window(s))"),
        ("windows", {"windows": 0, "before": 27.4}, "still measuring after 55 s (0 timed "
                                                    "window(s)), 27 s starting and warming up "
                                                    "before"),
        # A loaded 2-CPU VM: a 27-s first step, then two of 4 and 13 s. Slow, not unsettled.
        ("warmup", {"stepped": True, "first_step": 27.3, "later_steps": (2, 17.4)},
         "still warming up after 55 s: 3 step(s), the first 27 s, then 8.7 s each. Steps this "
         "slow need a longer --trial-timeout (or --timeout) to settle, or a smaller batch"),
        ("warmup", {"stepped": True, "first_step": 0.2, "later_steps": (400, 54.0)},
         "still warming up after 55 s (step times had not settled)"),
        # Nine quick steps, then one that never ended (a stuck worker): not "slow steps".
        ("warmup", {"stepped": True, "first_step": 0.2, "later_steps": (9, 1.1)},
         "still warming up after 55 s: 10 step(s) done, the first 0 s, then 0.1 s each, and "
         "the next had not finished after 54 s (a stuck DataLoader worker, or a step far "
         "slower than the others)"),
    ],
)
def test_stalled_names_the_phase_and_its_seconds(phase: str, kw: dict[str, object],
                                                 says: str) -> None:
    assert stalled(phase, 55.2, **kw) == says  # type: ignore[arg-type]


def test_every_phase_has_words_and_an_unknown_one_is_refused() -> None:
    assert all(stalled(p, 1.0) for p in PHASES)
    with pytest.raises(ValueError, match="unknown trial phase"):
        stalled("compose", 1.0)


def test_a_contract_error_is_an_input_error_naming_the_part_and_the_log() -> None:
    exc = ContractError.in_baseline(0, part="loss(model, batch)",
                                    reason="TypeError: adapter.loss must return a scalar tensor",
                                    log="out/trials/0/log.txt")
    assert isinstance(exc, InputError)
    text = str(exc)
    assert "baseline trial (#0" in text and "adapter's loss(model, batch)" in text
    assert "adapter contract" in text and "log: out/trials/0/log.txt" in text
    assert "TypeError: adapter.loss must return a scalar tensor" in text


def test_a_contract_error_says_what_the_part_that_failed_must_do() -> None:
    # A dataset() that raised was told what loss(model, batch) must return (2026-11-28).
    dataset = str(ContractError.in_baseline(0, part="dataset()", reason="RuntimeError: x", log=""))
    assert "dataset() returns the dataset" in dataset and "scalar tensor" not in dataset
    loss = str(ContractError.in_baseline(0, part="loss(model, batch), in its backward",
                                         reason="RuntimeError: x", log=""))
    assert "loss(model, batch) returns a scalar tensor" in loss
    other = str(ContractError.in_baseline(0, part="the adapter's __init__", reason="x", log=""))
    assert "docstrings say what each returns" in other


@pytest.mark.parametrize(("reason", "fix"), [
    # torch 2.13's own messages for a float64 batch into Linear, Conv2d and LSTM.
    ("RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float",
     "float64 tensors, NumPy's default"),
    ("RuntimeError: Input type (double) and bias type (float) should be the same", "np.float32"),
    ("ValueError: RNN input dtype (torch.float64) does not match weight dtype (torch.float32)",
     "float64"),
    ("RuntimeError: expected target dtype to be Long or Byte, but got Float", "int64"),
    # torch 2.13's for strings the default collate left as lists of str.
    ("AttributeError: 'list' object has no attribute 'size'", "a collate_fn"),
    ("TypeError: embedding(): argument 'indices' (position 2) must be Tensor, not list",
     "lists of str"),
    ("TypeError: expected Tensor as element 0 in argument 0, but got str", "a collate_fn"),
])
def test_a_common_failure_gets_its_own_fix_before_the_contract(reason: str, fix: str) -> None:
    # A dataset of float64 NumPy arrays was told only what loss(model, batch) must return.
    text = str(ContractError.in_baseline(0, part="loss(model, batch)", reason=reason, log=""))
    assert fix in text and "returns a scalar tensor" in text
    plain = str(ContractError.in_baseline(0, part="loss(model, batch)", reason="x", log=""))
    assert "float64" not in plain and "int64" not in plain
