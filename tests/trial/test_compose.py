"""Composing the user's step: the model-side knobs in their one right order (precision, then
checkpointing, then compile), the loader knobs, and the step's own bookkeeping (CPU only)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import autotune.trial.compose as compose
import autotune.trial.model_features as model_features
from autotune import TrainConfig, load_adapter
from autotune.trial.blame import blame, blamed
from autotune.trial.compose import TrainStep, apply_model_features
from autotune.trial.features.dataloader import loader_knobs
from autotune.trial.features.checkpoint import chosen_blocks
from autotune.trial.measure import StepResult
from helpers import in_one_gloo_rank

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _keep_matmul_precision() -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


def blocks_model(n: int = 4) -> nn.Sequential:
    return nn.Sequential(*(nn.Linear(4, 4) for _ in range(n)))


def checkpointed(blocks: nn.Sequential) -> list[bool]:
    return [bool(getattr(b, "_autotune_checkpointed", False)) for b in blocks]


# -- apply_model_features ----------------------------------------------------------------------------


def test_features_apply_in_order_precision_checkpoint_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_checkpoint = model_features.apply_checkpoint

    def precision(amp_dtype: str) -> None:
        calls.append(f"precision {amp_dtype}")

    def checkpoint(blocks: Any, fraction: float) -> int:
        calls.append(f"checkpoint {fraction:g}")
        return real_checkpoint(blocks, fraction)

    def compile_(model: nn.Module, mode: str) -> nn.Module:
        # Compile must capture the checkpointed forward, not the plain one.
        calls.append(f"compile {mode} (blocks checkpointed: {checkpointed(model)})")
        return nn.Identity()

    monkeypatch.setattr(model_features, "set_matmul_precision", precision)
    monkeypatch.setattr(model_features, "apply_checkpoint", checkpoint)
    monkeypatch.setattr(model_features, "apply_compile", compile_)
    model = blocks_model(2)
    module, wrapped = apply_model_features(model, list(model), amp_dtype="tf32", checkpoint=1.0,
                                           compile="default")
    assert calls == ["precision tf32", "checkpoint 1",
                     "compile default (blocks checkpointed: [True, True])"]
    assert isinstance(module, nn.Identity) and wrapped == 2


@pytest.mark.slow  # imports torch._dynamo (seconds), though nothing is compiled
def test_checkpoint_wraps_before_a_real_lazy_compile() -> None:
    # torch.compile compiles on the first forward: wrapping alone compiles nothing.
    model = blocks_model(4)
    module, wrapped = apply_model_features(model, list(model), amp_dtype="fp32", checkpoint=0.5,
                                           compile="default")
    assert wrapped == 2 and checkpointed(model) == [True, False, True, False]
    assert module is not model and getattr(module, "_orig_mod", None) is model


def test_no_compile_returns_the_model_itself() -> None:
    model = blocks_model(3)
    module, wrapped = apply_model_features(model, list(model), amp_dtype="fp32", checkpoint=0.0,
                                           compile="none")
    assert module is model and wrapped == 0 and checkpointed(model) == [False] * 3


@pytest.mark.parametrize(("amp_dtype", "precision"),
                         [("fp32", "highest"), ("tf32", "high"), ("bf16", "highest"),
                          ("fp16", "highest")])
def test_matmul_precision_follows_the_dtype(amp_dtype: str, precision: str) -> None:
    torch.set_float32_matmul_precision("medium")
    apply_model_features(nn.Linear(2, 2), [], amp_dtype=amp_dtype, checkpoint=0.0,
                         compile="none")
    assert torch.get_float32_matmul_precision() == precision


def test_checkpointing_twice_wraps_once() -> None:
    model = blocks_model(2)
    apply_model_features(model, list(model), amp_dtype="fp32", checkpoint=1.0, compile="none")
    forward = model[0].forward
    apply_model_features(model, list(model), amp_dtype="fp32", checkpoint=1.0, compile="none")
    assert model[0].forward is forward  # not a checkpoint inside a checkpoint


@pytest.mark.parametrize(("n", "fraction", "chosen"),
                         [(4, 0.0, []), (4, 0.25, [0]), (4, 0.5, [0, 2]), (4, 1.0, [0, 1, 2, 3]),
                          (12, 0.25, [0, 4, 8]), (0, 1.0, [])])
def test_chosen_blocks_are_spread_evenly(n: int, fraction: float, chosen: list[int]) -> None:
    assert chosen_blocks(n, fraction) == chosen


# -- loader_knobs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "knobs"),
    [
        (TrainConfig(batch_size=8), {"batch_size": 8, "num_workers": 0, "pin_memory": False}),
        (TrainConfig(batch_size=8, pin_memory=True, grad_accum=4, amp_dtype="bf16"),
         {"batch_size": 8, "num_workers": 0, "pin_memory": True}),  # only the loader's knobs
        (TrainConfig(batch_size=16, num_workers=2),
         {"batch_size": 16, "num_workers": 2, "pin_memory": False, "persistent_workers": False}),
        (TrainConfig(batch_size=16, num_workers=2, prefetch_factor=4, persistent_workers=True),
         {"batch_size": 16, "num_workers": 2, "pin_memory": False, "persistent_workers": True,
          "prefetch_factor": 4}),
    ],
)
def test_loader_knobs(config: TrainConfig, knobs: dict[str, Any]) -> None:
    assert loader_knobs(config) == knobs


# -- the step ------------------------------------------------------------------------------------------


@pytest.fixture
def tiny_step(tiny_adapter: Path) -> Iterator[Any]:
    steps: list[TrainStep] = []

    def build(config: TrainConfig, **kw: Any) -> TrainStep:
        step = compose.compose(load_adapter(tiny_adapter)(), config, CPU, **kw)
        steps.append(step)
        return step

    yield build
    for step in steps:
        step.close()


def test_a_step_is_grad_accum_micro_batches(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8, grad_accum=3, checkpoint=1.0))
    assert step.blocks_checkpointed == 2
    result = step()
    assert isinstance(result, StepResult)
    assert result.items == 24 and result.data_wait >= 0.0
    assert step.finite()
    assert all(p.grad is None for p in step.model.parameters())  # zeroed after the step


def test_a_step_says_when_it_ran_a_batch_shape_for_the_first_time(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8, grad_accum=2))
    first = step()
    assert first.new_shape and first.new_share == 0.5  # the first micro-batch's shape only
    assert [step().new_shape for _ in range(2)] == [False, False]  # one shape throughout
    graphed = tiny_step(TrainConfig(batch_size=8))
    graphed._mark_cudagraph_step = True  # a CUDA-graph config: a graph per shape is its cost
    assert graphed().new_shape is False


def test_the_loader_is_built_from_the_loader_knobs(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=16, num_workers=1, prefetch_factor=3))
    assert step.loader.batch_size == 16 and step.loader.num_workers == 1
    assert step.loader.prefetch_factor == 3 and step.loader.drop_last
    batch, items = step.next_batch()
    assert items == 16 and batch[0].shape == (16, 8)


def test_epochs_roll_over(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=256))  # 512 samples: two batches an epoch
    assert [step.next_batch()[1] for _ in range(5)] == [256] * 5


def test_resident_step_trains_on_one_batch_without_the_loader(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8, grad_accum=2))
    batch, _ = step.next_batch()
    before = [p.detach().clone() for p in step.model.parameters()]
    pulled = []
    step.next_batch = lambda: pulled.append(1)  # type: ignore[method-assign]
    step.resident_step(batch)
    assert pulled == []
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters()))


def test_a_dataset_built_elsewhere_is_used(tiny_step: Any) -> None:
    # A fork server builds the dataset once and hands it to each trial.
    dataset = torch.utils.data.TensorDataset(torch.zeros(32, 8), torch.zeros(32, dtype=torch.long))
    step = tiny_step(TrainConfig(batch_size=8), dataset=dataset)
    assert step.loader.dataset is dataset


def test_a_loss_that_is_not_a_scalar_is_refused(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8))
    step.adapter.loss = lambda model, batch: model(batch[0])  # per-sample logits
    with pytest.raises(TypeError, match=r"scalar tensor, got Tensor of shape \(8, 2\)"):
        step()


def test_a_loss_that_does_not_require_grad_is_refused(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8))
    loss = step.adapter.loss
    step.adapter.loss = lambda model, batch: loss(model, batch).detach()
    with pytest.raises(TypeError, match="does not require grad") as excinfo:
        step()
    assert blamed(excinfo.value) == "loss(model, batch)"


# -- the loader's start ---------------------------------------------------------------------------------


def test_the_first_batch_is_waited_for_apart_and_used_by_the_first_step(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=8))
    step.start_loader()
    assert len(step._pending) == 1
    first = step._pending[0]
    step.start_loader()  # once only
    assert list(step._pending) == [first]
    batch, n = step.next_batch()
    assert batch is first and n == 8 and not step._pending


def test_a_loader_without_a_batch_says_why(tiny_step: Any) -> None:
    step = tiny_step(TrainConfig(batch_size=1024))  # 512 samples, full batches only
    with pytest.raises(RuntimeError, match="the loader yielded no batch") as excinfo:
        step.start_loader()
    assert blamed(excinfo.value) == "loader (dataset, collate_fn, sampler)"


def test_a_dataloader_returned_as_the_dataset_says_what_to_return(tiny_step: Any) -> None:
    # Batched twice, it failed in the default collate: "'DataLoader' object is not
    # subscriptable" (a held-out adapter, 2026-11-26).
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)))
    with pytest.raises(TypeError, match=r"dataset\(\) returned a DataLoader: return its "
                                        r"dataset.*make_loader") as excinfo:
        tiny_step(TrainConfig(batch_size=8), dataset=loader)
    assert blamed(excinfo.value) == "dataset()"


def test_a_batch_of_any_structure_trains(test_adapters: Path) -> None:
    # Dict samples, the adapter's collate_fn makes a dataclass batch; items() by default.
    step = compose.compose(load_adapter(test_adapters / "structured.py")(),
                           TrainConfig(batch_size=8), CPU)
    try:
        assert step().items == 8 and step.finite()
        batch, _ = step.next_batch()
        assert type(batch).__name__ == "Batch" and len(batch.ids) == 8
    finally:
        step.close()


def test_phases_are_announced_while_building(tiny_adapter: Path) -> None:
    heard: list[str] = []
    step = compose.compose(load_adapter(tiny_adapter)(), TrainConfig(batch_size=8), CPU,
                           on_phase=lambda phase: heard.append(phase.value))
    step.close()
    assert heard == ["model", "dataset"]


# -- the adapter's own code is blamed for its own failures ----------------------------------------------


def boom(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("the adapter's bug")


@pytest.mark.parametrize(
    ("method", "part", "when"),
    [
        ("model", "model()", "compose"),
        ("optimizer", "optimizer(model)", "compose"),
        ("blocks", "blocks(model)", "compose"),
        ("dataset", "dataset()", "compose"),
        ("loader_args", "loader_args()", "compose"),
        ("make_loader", "make_loader(dataset, **knobs)", "compose"),
        ("items", "items(batch)", "step"),
        ("loss", "loss(model, batch)", "step"),
    ],
)
def test_an_exception_from_the_adapter_names_its_part(
    tiny_adapter: Path, method: str, part: str, when: str
) -> None:
    broken = type("Broken", (load_adapter(tiny_adapter),), {method: boom})
    with pytest.raises(ValueError, match="the adapter's bug") as excinfo:
        step = compose.compose(broken(), TrainConfig(batch_size=8), CPU)
        assert when == "step"
        try:
            step()
        finally:
            step.close()
    assert blamed(excinfo.value) == part


def test_collate_and_dataset_errors_are_the_loaders(tiny_adapter: Path) -> None:
    broken = type("Broken", (load_adapter(tiny_adapter),), {
        "loader_args": lambda self: {"collate_fn": boom}})
    step = compose.compose(broken(), TrainConfig(batch_size=8), CPU)
    with pytest.raises(ValueError) as excinfo:
        step.start_loader()
    step.close()
    assert blamed(excinfo.value) == "loader (dataset, collate_fn, sampler)"


def test_a_bad_dataloader_argument_is_the_adapters(tiny_adapter: Path) -> None:
    broken = type("Broken", (load_adapter(tiny_adapter),), {
        "loader_args": lambda self: {"colate_fn": None}})  # a typo DataLoader refuses
    with pytest.raises(TypeError, match="colate_fn") as excinfo:
        compose.compose(broken(), TrainConfig(batch_size=8), CPU)
    assert blamed(excinfo.value) == "the DataLoader built from loader_args()"


def test_what_a_config_explains_is_not_blamed_on_the_adapter(tiny_adapter: Path) -> None:
    def oom(self: Any, model: Any, batch: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    step = compose.compose(type("Big", (load_adapter(tiny_adapter),), {"loss": oom})(),
                           TrainConfig(batch_size=8), CPU)
    with pytest.raises(torch.OutOfMemoryError) as excinfo:
        step()
    step.close()
    assert blamed(excinfo.value) == ""
    compile_error = type("BackendCompilerFailed", (RuntimeError,), {"__module__": "torch._dynamo.exc"})
    exc = compile_error("inductor failed")
    blame(exc, "loss(model, batch)")
    assert blamed(exc) == ""


def test_ddp_wraps_the_checkpointed_model_inside_compile() -> None:
    # compile(DDP(checkpointed model)): Dynamo's DDPOptimizer splits at bucket boundaries.
    printed = in_one_gloo_rank(textwrap.dedent("""
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from autotune.trial.compose import apply_model_features
        from autotune.trial.features.ddp import apply_ddp
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        wrapped, checkpointed = apply_model_features(
            model, list(model), amp_dtype="fp32", checkpoint=1.0, compile="default",
            ddp=lambda m: apply_ddp(m, torch.device("cpu"), bucket_cap_mb=None,
                                    gradient_as_bucket_view=False, static_graph=False))
        ddp = getattr(wrapped, "_orig_mod")
        print(checkpointed, isinstance(ddp, DistributedDataParallel), ddp.module is model)
    """))
    assert printed.split() == ["2", "True", "True"]


def test_the_step_runs_on_the_configs_intra_op_threads(tiny_step: Any) -> None:
    before = torch.get_num_threads()
    try:
        tiny_step(TrainConfig(batch_size=8, intra_op_threads=1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
