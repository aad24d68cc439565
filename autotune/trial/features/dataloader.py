"""DataLoader knobs: workers, prefetching, pinning, persistence, batch size.

What is loaded (dataset, collate_fn, sampler, drop_last, ...) is the adapter's; how fast it is
loaded is the tool's: the knobs go over the adapter's `loader_args()`, or into its
`make_loader(dataset, **knobs)` when it builds the loader itself.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from autotune.adapter import Adapter, check_loader_args, defines
from autotune.contract.config import TrainConfig
from autotune.trial.blame import blaming
from autotune.trial.features.sampling import LazyShuffleSampler
from autotune.trial.lifetime import with_parent_death

__all__ = ["apply_dataloader", "build_loader", "dataloader_kwargs", "loader_knobs", "to_device"]


def loader_knobs(config: TrainConfig) -> dict[str, Any]:
    """The DataLoader keyword arguments of `config`'s loader knobs."""
    return dataloader_kwargs(
        batch_size=config.batch_size, num_workers=config.num_workers,
        prefetch_factor=config.prefetch_factor, pin_memory=config.pin_memory,
        persistent_workers=config.persistent_workers)


def build_loader(adapter: Adapter, config: TrainConfig, dataset: Any) -> Iterable[Any]:
    """The adapter's loader (`make_loader`) or a DataLoader of its `loader_args` under the
    loader knobs; workers die with this process either way (see lifetime.py)."""
    if defines(type(adapter), "make_loader"):
        with blaming("make_loader(dataset, **knobs)"):
            return apply_dataloader(dataset, loader_knobs(config),
                                    make_loader=adapter.make_loader)
    if isinstance(dataset, DataLoader):  # a loader of its own is make_loader's business
        with blaming("dataset()"):
            raise TypeError(
                "dataset() returned a DataLoader: return its dataset (the tool builds the "
                "loader with the knobs it searches, your collate_fn and sampler from "
                "loader_args()), or build the whole loader in make_loader(dataset, **knobs)")
    with blaming("loader_args()"):
        args = adapter.loader_args()
    with blaming("the DataLoader built from loader_args()"):
        return apply_dataloader(dataset, loader_knobs(config), loader_args=args)


def dataloader_kwargs(
    *,
    batch_size: int,
    num_workers: int,
    prefetch_factor: int | None,
    pin_memory: bool,
    persistent_workers: bool,
) -> dict[str, Any]:
    """The DataLoader arguments of the loader knobs (the "how fast", not the "what")."""
    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "num_workers": num_workers,
        "pin_memory": pin_memory,
    }
    if num_workers > 0:
        # PyTorch raises if either is given without workers.
        kwargs["persistent_workers"] = persistent_workers
        if prefetch_factor is not None:
            kwargs["prefetch_factor"] = prefetch_factor
    return kwargs


def apply_dataloader(
    dataset: Any,
    knobs: dict[str, Any],
    *,
    loader_args: Mapping[str, Any] | None = None,
    make_loader: Callable[..., Iterable[Any]] | None = None,
) -> Iterable[Any]:
    """A training loader over `dataset` with the loader knobs `knobs` (`dataloader_kwargs`'s
    result) over the adapter's `loader_args`, or the adapter's own `make_loader(dataset,
    **knobs)`. Its workers die with this process either way (see lifetime.py).

    Without a sampler or shuffle of the adapter's, a map-style dataset is read in a random
    order that costs nothing to start (`LazyShuffleSampler`; `shuffle=True` gets it too: the
    same law, without a full permutation); without drop_last, only full batches are used.
    """
    if make_loader is not None:
        # All five knobs, with values DataLoader accepts, so the hook can pass them straight on.
        loader = make_loader(dataset, **{"prefetch_factor": None, "persistent_workers": False,
                                         **knobs})
        if isinstance(loader, DataLoader):  # its workers must die with the trial too
            loader.worker_init_fn = with_parent_death(loader.worker_init_fn)
        return loader
    args = check_loader_args(loader_args or {}, "adapter")
    if not isinstance(dataset, IterableDataset) and args.get("sampler") is None \
            and args.get("shuffle", True):
        args.pop("shuffle", None)
        args["sampler"] = LazyShuffleSampler(dataset, generator=args.get("generator"))
    args.setdefault("drop_last", True)
    args["worker_init_fn"] = with_parent_death(args.get("worker_init_fn"))
    return DataLoader(dataset, **args, **knobs)


def to_device(batch: Any, device: torch.device, non_blocking: bool,
              memory_format: torch.memory_format | None = None) -> Any:
    """Move every tensor in a (nested) batch to `device`: tensors, objects with a
    `.to(device, non_blocking=...)` (HF `BatchEncoding`, PyG `Data`), mappings (their type kept
    where it can be rebuilt), namedtuples, tuples, lists and dataclasses. With `memory_format`
    (`memory_format.batch_format`), each 4-D floating tensor is put in it on the device, those
    of a mapping moved by its own `.to` (an HF `BatchFeature`'s pixel values) too.

    `non_blocking` only overlaps the copy with compute when the source is pinned; with pageable
    memory the copy is synchronous whatever the flag says.
    """
    def again(value: Any) -> Any:
        return to_device(value, device, non_blocking, memory_format)

    if isinstance(batch, torch.Tensor):
        moved = batch.to(device, non_blocking=non_blocking)
        if memory_format is not None and moved.dim() == 4 and moved.is_floating_point():
            return moved.contiguous(memory_format=memory_format)
        return moved
    to = getattr(batch, "to", None)
    if callable(to) and not isinstance(batch, type):
        moved = to(device, non_blocking=non_blocking) if _takes_non_blocking(to) else to(device)
        if memory_format is not None and isinstance(moved, Mapping):  # its tensors are here now
            return _mapping(moved, {k: again(v) for k, v in moved.items()})
        return moved
    if isinstance(batch, Mapping):
        return _mapping(batch, {k: again(v) for k, v in batch.items()})
    if isinstance(batch, tuple):
        moved = [again(v) for v in batch]
        if hasattr(batch, "_fields"):  # namedtuple
            return type(batch)(*moved)
        return _rebuilt(batch, moved, tuple)
    if isinstance(batch, list):
        return _rebuilt(batch, [again(v) for v in batch], list)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{
            f.name: again(getattr(batch, f.name)) for f in dataclasses.fields(batch) if f.init})
    return batch


def _takes_non_blocking(method: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # a builtin inspect cannot read: try the keyword
        return True
    return any(p.name == "non_blocking" or p.kind is p.VAR_KEYWORD for p in params)


def _mapping(batch: Mapping[Any, Any], moved: dict[Any, Any]) -> Mapping[Any, Any]:
    """`moved` in `batch`'s own mapping type where it can be rebuilt, else a dict."""
    if type(batch) is dict:
        return moved
    if isinstance(batch, MutableMapping):
        try:  # a copy keeps the type and its other state (a defaultdict's factory)
            out = copy.copy(batch)
            for key, value in moved.items():
                out[key] = value
            return out
        except Exception:  # a mapping that cannot be copied: a plain dict still trains
            return moved
    return _rebuilt(batch, moved, dict)


def _rebuilt(batch: Any, moved: Any, plain: type) -> Any:
    """`moved` as `batch`'s own type (a subclass of `plain`) where it can be rebuilt."""
    if type(batch) is plain:
        return moved if type(moved) is plain else plain(moved)
    try:
        return type(batch)(moved)
    except Exception:  # a subclass whose constructor takes something else
        return plain(moved)
