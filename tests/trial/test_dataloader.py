"""The loader: the adapter's arguments (what is loaded) under the tool's knobs (how fast), the
adapter's own loader factory, the worker guard kept either way, and batches of any structure
moved to the device (CPU only: a "device" here is a dtype change seen through `.to`)."""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import signal
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, SequentialSampler, TensorDataset

from autotune import InputError
from autotune.trial.features.dataloader import apply_dataloader, dataloader_kwargs, to_device
from autotune.trial.features.sampling import LazyShuffleSampler
from autotune.trial.lifetime import die_with_parent, with_parent_death

CPU = torch.device("cpu")
KNOBS = dataloader_kwargs(batch_size=4, num_workers=0, prefetch_factor=None, pin_memory=False,
                          persistent_workers=False)


def data(n: int = 16) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


class Stream(IterableDataset):
    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(torch.arange(10, dtype=torch.float32).unsqueeze(1))


# -- defaults and the adapter's loader_args --------------------------------------------------------


def test_defaults_read_a_map_style_dataset_in_a_random_order_in_full_batches() -> None:
    loader = apply_dataloader(data(18), KNOBS)
    assert isinstance(loader, DataLoader)
    assert isinstance(loader.sampler, LazyShuffleSampler)  # no full permutation to start
    assert loader.drop_last and loader.worker_init_fn is die_with_parent
    labels = [int(i) for _, y in loader for i in y]
    assert len(labels) == 16 and len(set(labels)) == 16  # 18 samples: 4 full batches


def test_an_iterable_dataset_is_not_shuffled() -> None:
    loader = apply_dataloader(Stream(), KNOBS)
    assert [b.flatten().tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_loader_args_decide_what_is_loaded() -> None:
    def collate(samples: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        return {"x": torch.stack([s[0] for s in samples]), "y": torch.stack([s[1] for s in samples])}

    loader = apply_dataloader(data(10), KNOBS, loader_args={
        "collate_fn": collate, "shuffle": False, "drop_last": False})
    assert isinstance(loader, DataLoader) and isinstance(loader.sampler, SequentialSampler)
    batches = list(loader)
    assert [b["y"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_adapters_sampler_is_kept_and_shuffle_gets_the_lazy_order() -> None:
    sampler = SequentialSampler(range(16))
    assert apply_dataloader(data(), KNOBS, loader_args={"sampler": sampler}).sampler is sampler
    g = torch.Generator().manual_seed(3)
    shuffled = apply_dataloader(data(), KNOBS, loader_args={"shuffle": True, "generator": g})
    assert isinstance(shuffled.sampler, LazyShuffleSampler) and shuffled.sampler.generator is g


@pytest.mark.parametrize("key", ["batch_size", "num_workers", "pin_memory", "batch_sampler"])
def test_loader_args_may_not_take_what_the_tool_owns(key: str) -> None:
    with pytest.raises(InputError, match=f"loader_args\\(\\) sets '{key}'"):
        apply_dataloader(data(), KNOBS, loader_args={key: 1})


# -- workers die with the trial, the adapter's worker_init_fn still runs -------------------------------

_INITIALIZED: list[int] = []  # in a worker process: the ids the adapter's worker_init_fn saw


def adapters_worker_init(worker_id: int) -> None:
    _INITIALIZED.append(worker_id)


def parent_death_signal() -> int:
    sig = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG, <linux/prctl.h>
    return sig.value


class Probe(torch.utils.data.Dataset):
    """Each sample: the worker's parent-death signal and how many times its init ran."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([parent_death_signal(), len(_INITIALIZED)])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_adapters_worker_init_fn_runs_after_the_worker_guard() -> None:
    knobs = dataloader_kwargs(batch_size=2, num_workers=1, prefetch_factor=None,
                              pin_memory=False, persistent_workers=False)
    loader = apply_dataloader(Probe(), knobs, loader_args={"worker_init_fn": adapters_worker_init,
                                                           "shuffle": False})
    batch = next(iter(loader))
    assert batch.tolist() == [[int(signal.SIGKILL), 1]] * 2
    assert _INITIALIZED == []  # it ran in the worker, not here


def test_chaining_the_guard_is_idempotent() -> None:
    assert with_parent_death(None) is die_with_parent
    assert with_parent_death(die_with_parent) is die_with_parent
    chained = with_parent_death(adapters_worker_init)
    assert with_parent_death(chained) is chained


# -- the adapter's own loader factory ----------------------------------------------------------------


def test_make_loader_gets_every_knob_and_its_dataloader_keeps_the_guard() -> None:
    seen: dict[str, Any] = {}

    def make_loader(dataset: Any, **knobs: Any) -> DataLoader[Any]:
        seen.update(knobs)
        return DataLoader(dataset, shuffle=False, worker_init_fn=adapters_worker_init, **knobs)

    loader = apply_dataloader(data(8), KNOBS, make_loader=make_loader)
    # All five, with values DataLoader accepts without workers.
    assert seen == {"batch_size": 4, "num_workers": 0, "pin_memory": False,
                    "prefetch_factor": None, "persistent_workers": False}
    assert isinstance(loader, DataLoader)
    assert loader.worker_init_fn is not adapters_worker_init  # chained behind the guard
    assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_make_loader_may_return_any_iterable() -> None:
    batches = [{"x": torch.ones(2, 1)}] * 3
    assert apply_dataloader(data(), KNOBS, make_loader=lambda ds, **kw: batches) is batches


# -- to_device ---------------------------------------------------------------------------------------

# A device move seen on the CPU: every tensor that went through `.to(device)` gains a flag.


class Moved(torch.Tensor):
    pass


@pytest.fixture
def device_move(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record the non_blocking of every tensor move; each moved tensor comes back a `Moved`."""
    calls: list[bool] = []
    real_to = torch.Tensor.to

    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(bool(kwargs.get("non_blocking", False)))
        return real_to(self, *args, **kwargs).as_subclass(Moved)

    monkeypatch.setattr(torch.Tensor, "to", to)
    return calls


class Pair(NamedTuple):
    x: torch.Tensor
    label: str


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: torch.Tensor
    meta: dict[str, Any]
    derived: int = dataclasses.field(init=False, default=0)


class Encoding(collections.UserDict):  # what HF's BatchEncoding is: a UserDict with .to
    def to(self, device: Any, *, non_blocking: bool = False) -> Encoding:
        self.moved_with = non_blocking
        return self


class OldEncoding:  # a .to without non_blocking (older libraries)
    def to(self, device: Any) -> OldEncoding:
        self.moved = True
        return self


def test_to_device_reaches_every_tensor_and_keeps_the_structure(device_move: list[bool]) -> None:
    t = torch.zeros(2)
    batch = {
        "pair": Pair(t, "a"),
        "list": [t, (t, 3)],
        "ordered": collections.OrderedDict(a=t),
        "default": collections.defaultdict(list, a=t),
        "frozen": Frozen(t, {"k": t}),
        "text": "unchanged",
    }
    moved = to_device(batch, CPU, non_blocking=True)
    assert type(moved) is dict and moved["text"] == "unchanged"
    assert isinstance(moved["pair"], Pair) and isinstance(moved["pair"].x, Moved)
    assert moved["pair"].label == "a"
    assert isinstance(moved["list"], list) and isinstance(moved["list"][1], tuple)
    assert isinstance(moved["list"][0], Moved) and isinstance(moved["list"][1][0], Moved)
    assert moved["list"][1][1] == 3
    assert type(moved["ordered"]) is collections.OrderedDict
    assert isinstance(moved["ordered"]["a"], Moved)
    assert type(moved["default"]) is collections.defaultdict
    assert moved["default"].default_factory is list and isinstance(moved["default"]["a"], Moved)
    assert isinstance(moved["frozen"], Frozen) and isinstance(moved["frozen"].x, Moved)
    assert isinstance(moved["frozen"].meta["k"], Moved)
    assert device_move == [True] * 7
    assert not isinstance(batch["pair"].x, Moved)  # the CPU batch itself is left alone


def test_to_device_calls_a_batchs_own_to(device_move: list[bool]) -> None:
    enc = Encoding(input_ids=torch.zeros(2, 3))
    assert to_device(enc, CPU, non_blocking=True) is enc and enc.moved_with is True
    old = OldEncoding()
    assert to_device([old], CPU, non_blocking=True)[0] is old and old.moved
    assert device_move == []  # their own .to moved them


def test_a_dataloader_as_the_dataset_is_the_adapters_own_business_with_make_loader() -> None:
    # Without make_loader it is an error that says what to return (tests/trial/test_compose.py);
    # with it, the adapter's make_loader decides what to do with it.
    import autotune
    from autotune.contract.config import TrainConfig
    from autotune.trial.features.dataloader import build_loader

    class Own(autotune.Adapter):
        def make_loader(self, dataset: Any, **knobs: Any) -> Any:
            return dataset  # the user's loader, as it is

    given = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 2)))
    assert build_loader(Own(), TrainConfig(batch_size=2), given) is given
    with pytest.raises(TypeError, match="returned a DataLoader"):
        build_loader(autotune.Adapter(), TrainConfig(batch_size=2), given)
