"""`optimizer_impl`: the adapter's optimizer rebuilt with foreach or fused, the same groups and
hyperparameters; left as built, with the reason, where the class has no such flag (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose
from autotune.trial.features.optimizer import apply_optimizer_impl

CPU = torch.device("cpu")


def grouped_sgd() -> torch.optim.SGD:
    model = nn.Linear(3, 2)
    return torch.optim.SGD([{"params": [model.weight], "lr": 0.5, "weight_decay": 0.1},
                            {"params": [model.bias]}], lr=0.1, momentum=0.9)


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_a_rebuild_keeps_every_group_and_its_hyperparameters(impl: str) -> None:
    before = grouped_sgd()
    after, note = apply_optimizer_impl(before, impl)
    assert note == "" and type(after) is torch.optim.SGD and after is not before
    assert len(after.param_groups) == 2
    for old, new in zip(before.param_groups, after.param_groups, strict=True):
        assert new["params"] == old["params"]  # the same Parameter objects
        assert {k: v for k, v in new.items() if k not in ("params", "foreach", "fused")} == \
            {k: v for k, v in old.items() if k not in ("params", "foreach", "fused")}
        assert new[impl] is True and not new[{"foreach": "fused", "fused": "foreach"}[impl]]
    assert after.defaults["lr"] == 0.1 and after.defaults[impl] is True


@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_fused_steps_on_a_cpu(cls: type[torch.optim.Optimizer]) -> None:
    # torch 2.13 has CPU kernels for the fused SGD, Adam and AdamW.
    model = nn.Linear(3, 2)
    optimizer, _ = apply_optimizer_impl(cls(model.parameters(), lr=0.1), "fused")
    before = model.weight.detach().clone()
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    assert not torch.equal(model.weight, before)


def test_default_is_the_adapters_own_optimizer() -> None:
    optimizer = grouped_sgd()
    assert apply_optimizer_impl(optimizer, "default") == (optimizer, "")


def test_without_the_flag_it_is_left_as_built_and_says_why() -> None:
    model = nn.Linear(3, 2)
    rmsprop = torch.optim.RMSprop(model.parameters())
    assert apply_optimizer_impl(rmsprop, "fused") == (
        rmsprop, "optimizer_impl=fused left at default: RMSprop.__init__ has no 'fused' argument")
    other = object()
    kept, note = apply_optimizer_impl(other, "foreach")
    assert kept is other and "object is not a torch.optim.Optimizer" in note
    stepped = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    stepped.step()
    kept, note = apply_optimizer_impl(stepped, "fused")
    assert kept is stepped and "already holds state" in note


def test_a_rebuild_pytorch_refuses_is_the_configs_error() -> None:
    adam = torch.optim.Adam(nn.Linear(3, 2).parameters(), differentiable=True)
    with pytest.raises(RuntimeError, match=r"optimizer_impl=fused: Adam\(fused=True\) refused"):
        apply_optimizer_impl(adam, "fused")


def test_a_fused_sgd_under_fp16_on_cuda_is_refused_and_elsewhere_built() -> None:
    """SGD's fused CUDA kernel steps on the overflow steps GradScaler skips (ResNet-50, fp16,
    an H100, torch 2.11: NaN in warm-up); the check runs on a CPU with the device named."""
    with pytest.raises(RuntimeError, match="fp16's GradScaler skips"):
        apply_optimizer_impl(grouped_sgd(), "fused", amp_dtype="fp16", device_type="cuda")
    for impl, dtype, device in (("fused", "bf16", "cuda"), ("foreach", "fp16", "cuda"),
                                ("fused", "fp16", "cpu")):
        rebuilt, note = apply_optimizer_impl(grouped_sgd(), impl, amp_dtype=dtype,
                                             device_type=device)
        assert note == "" and rebuilt.defaults[impl] is True
    adamw = torch.optim.AdamW(nn.Linear(3, 2).parameters())  # Adam's kernels skip them
    assert apply_optimizer_impl(adamw, "fused", amp_dtype="fp16", device_type="cuda")[1] == ""
    # The CPU's own parameters: built (its fused kernel skipped the overflow steps).
    assert apply_optimizer_impl(grouped_sgd(), "fused", amp_dtype="fp16")[1] == ""


def test_the_step_trains_with_the_rebuilt_optimizer(tiny_adapter: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    step = compose(load_adapter(tiny_adapter)(), TrainConfig(batch_size=8,
                                                             optimizer_impl="fused"), CPU)
    try:
        assert step.optimizer.param_groups[0]["fused"] is True  # the adapter's SGD, rebuilt
        step()
        assert step.finite() and capsys.readouterr().err == ""
    finally:
        step.close()


def test_an_optimizer_with_a_scheduler_or_hooks_is_left_as_built() -> None:
    from autotune.trial.features.optimizer import apply_optimizer_impl

    model = torch.nn.Linear(2, 2)
    scheduled = torch.optim.AdamW(model.parameters(), lr=1.0)
    torch.optim.lr_scheduler.StepLR(scheduled, step_size=1, gamma=0.5)
    same, note = apply_optimizer_impl(scheduled, "foreach")
    assert same is scheduled and "an LR scheduler attached" in note
    hooked = torch.optim.AdamW(model.parameters(), lr=1.0)
    hooked.register_step_post_hook(lambda opt, args, kwargs: None)
    same, note = apply_optimizer_impl(hooked, "foreach")
    assert same is hooked and "step hooks attached" in note
    plain = torch.optim.AdamW(model.parameters(), lr=1.0)
    rebuilt, note = apply_optimizer_impl(plain, "foreach")
    assert rebuilt is not plain and note == ""
