"""`compile_scope`: what `compile` compiles, the model or the adapter's loss whole (the model
traced into the loss's graph). The knob's rules, the trial, production and export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from autotune import Adapter, TrainConfig, load_adapter
from autotune.outputs.export import Best, to_hf, to_lightning
from autotune.study.space.file import parse_space
from autotune.trial.compose import compose
from autotune.trial.production import TunedConfig

LOSS = TrainConfig(batch_size=8, compile="default", compile_scope="loss")


# -- the knob -------------------------------------------------------------------------------------


def test_the_scope_needs_a_compile() -> None:
    with pytest.raises(ValueError) as excinfo:
        TrainConfig(batch_size=8, compile_scope="loss")
    assert str(excinfo.value) == ("compile_scope needs compile other than none (it says what is "
                                  "compiled), got compile_scope='loss' with compile='none'")


def test_a_config_made_eager_drops_its_scope_and_the_scope_is_part_of_the_graph() -> None:
    assert LOSS.replace(compile="none") == TrainConfig(batch_size=8)
    assert LOSS.replace(compile="reduce-overhead").compile_scope == "loss"  # still compiled
    assert LOSS.graph != LOSS.replace(compile_scope="model").graph  # a compile cache of its own
    assert LOSS.describe() == "bs=8 fp32 compile=default scope=loss"


class Eight(Adapter):
    batch_size = 8


def test_a_space_samples_the_scope_only_with_a_compile() -> None:
    space = parse_space({"compile": {"choices": ["none", "default"]},
                         "compile_scope": {"choices": ["model", "loss"]}},
                        source="s.yaml", adapter=Eight, device_type="cpu", cpus=2)
    assert sorted(c.describe() for c in space.enumerate()) == [
        "bs=8 fp32", "bs=8 fp32 compile=default", "bs=8 fp32 compile=default scope=loss"]


# -- the trial ------------------------------------------------------------------------------------


def test_with_the_loss_compiled_the_model_is_not_compiled_on_its_own(tiny_adapter: Path) -> None:
    step = compose(load_adapter(tiny_adapter)(), LOSS, torch.device("cpu"))
    model = compose(load_adapter(tiny_adapter)(), LOSS.replace(compile_scope="model"),
                    torch.device("cpu"))
    try:
        assert not hasattr(step.forward_model, "_orig_mod") and step.compiled_loss is not None
        assert hasattr(model.forward_model, "_orig_mod") and model.compiled_loss is None
    finally:
        step.close()
        model.close()


@pytest.mark.slow  # two compiles on the CPU: about 20 s
def test_a_compiled_loss_trains_as_the_eager_step_does(tiny_adapter: Path) -> None:
    """The same first batch and weights give the same loss and gradients, the loss compiled
    whole or not: the scope changes how the step runs, not what it computes."""
    grads = []
    for config in (TrainConfig(batch_size=8), LOSS):
        torch.manual_seed(0)
        step = compose(load_adapter(tiny_adapter)(), config, torch.device("cpu"))
        try:
            step.start_loader()
            batch, _ = step.next_batch()
            step.micro_step(batch, 1)
            grads.append([p.grad.clone() for p in step.model.parameters()])
        finally:
            step.close()
    for eager, compiled in zip(*grads, strict=True):
        torch.testing.assert_close(compiled, eager)


# -- production and export ------------------------------------------------------------------------


def test_production_compiles_the_loss_and_leaves_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []

    def fake_compile(fn: Any, **kw: Any) -> Any:
        compiled.append((fn, kw["mode"]))
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)

    def loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return model(batch).sum()

    linear = torch.nn.Linear(2, 2)
    tuned = TunedConfig(config=LOSS, device="cpu")
    assert tuned.wrap_model(linear) is linear and compiled == []
    assert tuned.wrap_loss(loss) is loss and compiled == [(loss, "default")]
    as_model = TunedConfig(config=LOSS.replace(compile_scope="model"), device="cpu")
    assert as_model.wrap_loss(loss) is loss and len(compiled) == 1  # nothing more compiled
    as_model.wrap_model(linear)
    assert compiled[1] == (linear, "default")


def test_export_says_how_to_compile_the_loss() -> None:
    hf, pl = to_hf(Best(config=LOSS)), to_lightning(Best(config=LOSS))
    assert any(n.startswith("compile_scope=loss") and "compute_loss" in n for n in hf.notes)
    assert any(n.startswith("compile_scope=loss") and "training_step" in n for n in pl.notes)
    plain = Best(config=LOSS.replace(compile_scope="model"))
    assert not any("compile_scope" in n for n in (*to_hf(plain).notes, *to_lightning(plain).notes))


def test_a_space_must_hold_the_model_scope_and_an_adapter_with_its_loss_in_the_model_has_none(
        ) -> None:
    from autotune import InputError

    raw = {"compile": {"choices": ["none", "default"]}, "compile_scope": {"choices": ["loss"]}}
    with pytest.raises(InputError, match="key 'compile_scope' must include PyTorch's default 'model': a config compiled"):
        parse_space(raw, source="s.yaml", adapter=Eight, device_type="cpu", cpus=2)

    class InModel(Eight):
        loss_in_model = True

    both = {**raw, "compile_scope": {"choices": ["model", "loss"]}}
    space = parse_space(both, source="s.yaml", adapter=InModel, device_type="cpu", cpus=2)
    assert all(c.compile_scope == "model" for c in space.enumerate())


def test_a_compile_gain_is_recorded_per_scope_and_layout() -> None:
    from autotune.study.policy.eager import gain_key

    assert gain_key(LOSS) == "default+loss"
    assert gain_key(LOSS.replace(compile_scope="model")) == "default"
    # Inductor lays convolutions out itself: a gain at one layout says little of the other.
    assert gain_key(LOSS.replace(memory_format="channels_last")) == "default+loss+channels_last"
