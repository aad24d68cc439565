"""`autotune.bridges.lightning`: a LightningModule and LightningDataModule as an adapter. The
bridge uses the classes through their methods only, so these tests give it plain stand-ins (no
Lightning needed); tests/test_examples.py runs it on real Lightning classes."""

from __future__ import annotations

import multiprocessing
from typing import Any, ClassVar

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from autotune import TrainConfig
from autotune.bridges.lightning import LightningAdapter
from autotune.trial.compose import compose


def pairs(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """A collate of the user's own (what the bridge must keep)."""
    return torch.stack([x for x, _ in batch]), torch.stack([y for _, y in batch])


class DataModule:
    calls: ClassVar[list[str]] = []

    def __init__(self, batch_size: int = 4, context: Any = None) -> None:
        self.batch_size = batch_size
        self.context = context

    def prepare_data(self) -> None:
        self.calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"setup:{stage}")
        g = torch.Generator().manual_seed(0)
        self.train = TensorDataset(torch.randn(64, 3, generator=g), torch.randint(0, 2, (64,)))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, collate_fn=pairs,
                          drop_last=True, multiprocessing_context=self.context,
                          num_workers=1 if self.context else 0)


class Module(nn.Module):
    """A LightningModule's surface: forward, training_step (logging), configure_optimizers."""

    optimizers: ClassVar[Any] = "list-and-schedulers"

    def __init__(self, width: int = 3) -> None:
        super().__init__()
        self.layer = nn.Linear(width, 2)
        self.seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.seen.append(batch_idx)
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return {"loss": loss}

    def log(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("there is no Trainer: the bridge makes logging a no-op")

    def configure_optimizers(self) -> Any:
        opt = torch.optim.SGD(self.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        return {"list-and-schedulers": ([opt], [sched]), "dict": {"optimizer": opt,
                "lr_scheduler": sched}, "one": opt, "list": [opt],
                "dicts": [{"optimizer": opt}], "two": [opt, torch.optim.SGD(self.parameters())],
                "none": None}[self.optimizers]


class Bridge(LightningAdapter):
    module = Module
    datamodule = DataModule


def test_the_batch_size_comes_from_the_datamodule() -> None:
    assert Bridge.batch_size == 4  # its __init__ default

    class Given(LightningAdapter):
        module, datamodule, datamodule_kwargs = Module, DataModule, {"batch_size": 16}

    class Set(LightningAdapter):
        module, datamodule, batch_size = Module, DataModule, 8

    assert Given.batch_size == 16 and Set.batch_size == 8


def test_a_missing_class_is_named_when_the_adapter_is_defined() -> None:
    with pytest.raises(TypeError, match="set `datamodule = ...` to your LightningDataModule"):
        class NoData(LightningAdapter):
            module = Module


def test_dataset_builds_the_datamodule_as_fit_does() -> None:
    DataModule.calls.clear()
    dataset = Bridge().dataset()
    assert isinstance(dataset, TensorDataset) and len(dataset) == 64
    assert DataModule.calls == ["prepare_data", "setup:fit"]


def test_a_batch_size_other_than_the_datamodules_is_refused() -> None:
    class Other(LightningAdapter):
        module, datamodule, batch_size = Module, DataModule, 8

    with pytest.raises(ValueError, match=r"batches 4, the adapter 8: set `batch_size = 4`"):
        Other().dataset()


def test_make_loader_keeps_what_is_loaded_and_takes_the_knobs() -> None:
    adapter = Bridge()
    dataset = adapter.dataset()
    loader = adapter.make_loader(dataset, batch_size=8, num_workers=0, prefetch_factor=None,
                                 pin_memory=False, persistent_workers=False)
    assert loader.batch_size == 8 and loader.num_workers == 0
    assert loader.collate_fn is pairs and loader.drop_last
    assert isinstance(loader.sampler, RandomSampler)  # shuffle=True, kept
    x, y = next(iter(loader))
    assert x.shape == (8, 3) and y.shape == (8,)


def test_make_loader_drops_a_multiprocessing_context_without_workers() -> None:
    class Spawning(LightningAdapter):
        module, datamodule = Module, DataModule
        datamodule_kwargs = {"context": multiprocessing.get_context("spawn")}

    adapter = Spawning()
    dataset = adapter.dataset()
    loader = adapter.make_loader(dataset, batch_size=4, num_workers=0, prefetch_factor=None,
                                 pin_memory=False, persistent_workers=False)
    assert loader.multiprocessing_context is None  # PyTorch raises for one without workers
    with_workers = adapter.make_loader(dataset, batch_size=4, num_workers=1, prefetch_factor=2,
                                       pin_memory=False, persistent_workers=False)
    assert with_workers.multiprocessing_context.get_start_method() == "spawn"


def test_a_batch_sampler_is_refused_with_the_fix() -> None:
    class Sampled(DataModule):
        def train_dataloader(self) -> DataLoader:
            sampler = torch.utils.data.BatchSampler(range(64), batch_size=4, drop_last=True)
            return DataLoader(self.train, batch_sampler=sampler)

    class Bad(LightningAdapter):
        module, datamodule, batch_size = Module, Sampled, 4

    with pytest.raises(ValueError, match="batch_sampler"):
        Bad().dataset()


@pytest.mark.parametrize("form", ["list-and-schedulers", "dict", "one", "list", "dicts"])
def test_every_form_of_configure_optimizers(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Module, "optimizers", form)
    adapter = Bridge()
    assert isinstance(adapter.optimizer(adapter.model()), torch.optim.SGD)


@pytest.mark.parametrize(("form", "error", "match"), [
    ("two", ValueError, "2 optimizers"), ("none", TypeError, "no optimizer")])
def test_what_cannot_be_timed_is_refused(form: str, error: type[Exception], match: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Module, "optimizers", form)
    adapter = Bridge()
    with pytest.raises(error, match=match):
        adapter.optimizer(adapter.model())


def test_training_step_is_the_loss() -> None:
    adapter = Bridge()
    model = adapter.model()
    batch = (torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
    first, second = adapter.loss(model, batch), adapter.loss(model, batch)
    assert first.ndim == 0 and torch.equal(first, second)
    assert model.seen == [0, 1]  # batch_idx counts the micro-batches


def test_manual_optimization_is_refused() -> None:
    class Manual(Module):
        def training_step(self, batch: Any, batch_idx: int) -> None:
            return None

    class M(LightningAdapter):
        module, datamodule = Manual, DataModule

    adapter = M()
    with pytest.raises(TypeError, match="manual optimization"):
        adapter.loss(adapter.model(), (torch.randn(4, 3), torch.tensor([0, 1, 0, 1])))


def test_a_trial_step_through_the_bridge() -> None:
    step = compose(Bridge(), TrainConfig(batch_size=8, grad_accum=2), torch.device("cpu"))
    try:
        result = step()
        assert result.items == 16 and step.finite()
        assert step.loader.collate_fn is pairs
    finally:
        step.close()


@pytest.mark.slow
def test_a_compiled_module_runs_its_training_step_compiled() -> None:
    adapter = Bridge()
    step = compose(adapter, TrainConfig(batch_size=8, compile="default"), torch.device("cpu"))
    try:
        for _ in range(2):
            step()
        assert step.finite()
        assert adapter._step is not step.model.training_step  # wrapped by the compiler
        assert step.model.seen == [0, 1]  # the original module's code ran
    finally:
        step.close()
