"""The contract users implement, and `load_adapter`, which checks it before any trial runs."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

from autotune.contract.batch import first_length
from autotune.contract.errors import InputError, near_miss
from autotune.contract.params import default_params, instantiate, readable

__all__ = ["LOADER_KNOBS", "Adapter", "check_loader_args", "defines", "load_adapter"]

_REQUIRED = ("dataset", "model", "optimizer", "loss")

LOADER_KNOBS = ("batch_size", "num_workers", "prefetch_factor", "pin_memory",
                "persistent_workers")
"""The DataLoader arguments the tool owns: how fast batches arrive, not what they hold."""
# Not for loader_args either: the dataset is dataset()'s, and a batch sampler fixes the batch
# size the search varies (PyTorch refuses it beside batch_size).
_NOT_LOADER_ARGS = {
    "dataset": "the dataset is what dataset() returns",
    "batch_sampler": "a batch sampler fixes the batch size the tool searches; give a `sampler`, "
                     "or build the whole loader in make_loader(dataset, **knobs)",
}


class Adapter:
    """Subclass this in a Python file and pass the file to `autotune search --adapter`.

    The tool builds the DataLoader, moves the model to the device, applies the precision,
    checkpointing and compile settings, and times `loss` + backward + `optimizer.step()`.
    """

    unit: ClassVar[str] = "samples"
    """What `items(batch)` counts: throughput is reported in these per second."""
    batch_size: ClassVar[int] = 32
    """The micro-batch size you train with today: the baseline trial uses it."""
    global_batch_size: ClassVar[int | None] = None
    """Samples per optimizer step when you accumulate gradients (None: `batch_size`). Every
    config keeps `batch_size * grad_accum` equal to it, so tuning never changes what an
    optimizer step computes."""
    vary_global_batch: ClassVar[bool] = False
    """True lets the search change the effective batch too (larger batches, free accumulation);
    best.yaml then says by how much and how to scale the learning rate. Same as
    `autotune search --vary-global-batch`."""
    samples_interact: ClassVar[bool] = False
    """True when a sample's loss depends on the others in its micro-batch (an in-batch
    contrastive loss, BatchNorm's statistics): the search keeps the micro-batch, never
    accumulating gradients over smaller ones (`study.space.interacting`)."""
    loss_in_model: ClassVar[bool] = False
    """True when compiling the model compiles the loss too: `compile_scope` stays "model"."""
    knobs: ClassVar[Mapping[str, Any]] = {}
    """Your own knobs, searched with the tool's: name -> an entry of a space file
    (`{"choices": [...]}` or `{"low": 1, "high": 8}`, `when:`), plus `affects:` loader, model
    or both (the default) and `default:` (else the first choice). Whether a value changes what
    training computes is your call. Read as `self.params[name]` (docs/adapters.md)."""

    @property
    def params(self) -> Mapping[str, Any]:
        """This trial's values of `knobs`, in every method; outside a trial, their defaults."""
        return self.__dict__.get("_params") or default_params(type(self).knobs)

    @classmethod
    def with_params(cls, params: Mapping[str, Any]) -> Self:
        """An instance whose `params` hold `params` over the knobs' defaults from before its
        `__init__` runs, as in a trial: in production, `MyAdapter.with_params(
        autotune.load_config("best.yaml").params)`. A knob it does not declare: `ValueError`."""
        return instantiate(cls, params)

    def dataset(self) -> Any:
        """A CPU-side map-style or iterable dataset yielding samples (the tool batches them)."""
        raise NotImplementedError

    def model(self) -> Any:
        """A fresh `torch.nn.Module` on the CPU (the tool moves it to the device)."""
        raise NotImplementedError

    def optimizer(self, model: Any) -> Any:
        """An optimizer over `model`'s parameters (already on the device)."""
        raise NotImplementedError

    def loss(self, model: Any, batch: Any) -> Any:
        """Forward one micro-batch (already on the device) and return a scalar loss tensor.

        Call `model(...)` here: that is the module the tool has checkpointed and compiled.
        It runs once per micro-batch, `grad_accum` times a step: work meant once a step (a
        scheduler's `step()`) repeats here. The tool steps and zeroes the optimizer itself.
        """
        raise NotImplementedError

    def blocks(self, model: Any) -> Sequence[Any]:
        """Repeated submodules (e.g. transformer layers) that activation checkpointing may wrap."""
        return ()

    def items(self, batch: Any) -> int:
        """How many `unit`s a (CPU-side) batch holds. By default the length of its first tensor:
        the first field of a tuple, list or dataclass, the first value of a dict."""
        if (n := first_length(batch)) is None:
            raise TypeError(
                f"cannot tell how many {self.unit} a batch of type {type(batch).__name__} holds: "
                "no tensor found in tensors, dicts, tuples, lists or dataclasses (what the tool "
                "moves to the device: make it one, or give its class .to(device)), or define "
                "items(self, batch) in the adapter")
        return n

    def loader_args(self) -> dict[str, Any]:
        """Optional: DataLoader keyword arguments that decide *what* is loaded: `collate_fn`,
        `sampler` or `shuffle`, `drop_last`, `worker_init_fn`, `generator`, ...

        The tool adds its own knobs over them (batch_size, num_workers, prefetch_factor,
        pin_memory, persistent_workers; naming one here is an error). Without a sampler or
        shuffle, a map-style dataset is read in a random order that costs nothing to start
        (`shuffle=True` gets the same); without drop_last, only full batches are used. What
        `dataset()` keeps on `self` (lengths for a sampler) is there: it ran on this adapter.
        """
        return {}

    def make_loader(self, dataset: Any, **knobs: Any) -> Iterable[Any]:
        """Optional: build the loader yourself (WebDataset, HF datasets, a custom sampler).

        Called with `dataset()`'s result and the knobs as keyword arguments, all five always
        given, with values `torch.utils.data.DataLoader` accepts (prefetch_factor None and
        persistent_workers False without workers). Return an iterable of batches that can be
        iterated again for the next epoch. Define this or `loader_args`, not both.
        """
        raise NotImplementedError

    def flops_per_item(self) -> float | None:
        """Optional: training FLOPs per unit (forward + backward), for MFU in `autotune lab`."""
        return None


def load_adapter(path: str | Path) -> type[Adapter]:
    """Import `path` and return its one `Adapter` subclass, or raise `InputError` saying why not."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: adapter file not found; pass a Python file to --adapter")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"_autotune_adapter_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be imported as Python; the adapter must be a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    if str(path.resolve().parent) not in sys.path:  # its sibling modules import, as a script's
        sys.path.append(str(path.resolve().parent))  # do (last: it shadows no installed one)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any error in user code: report it with its traceback
        del sys.modules[module_name]
        tb = "".join(traceback.format_exception(exc))
        raise InputError(f"{path}: importing the adapter failed:\n{tb}") from None

    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Adapter) and obj is not Adapter
        and obj.__module__ == module_name
    ]
    if not found:
        raise InputError(
            f"{path}: no subclass of autotune.Adapter defined in this file; "
            "define one: `class MyAdapter(autotune.Adapter): ...`"
        )
    if len(found) > 1:
        names = ", ".join(sorted(cls.__name__ for cls in found))
        raise InputError(f"{path}: {len(found)} Adapter subclasses ({names}); keep exactly one")
    cls = found[0]
    missing = [name for name in _REQUIRED if getattr(cls, name) is getattr(Adapter, name)]
    if missing:
        raise InputError(f"{path}: {cls.__name__} does not define {', '.join(missing)}; an "
                         f"adapter must define {', '.join(_REQUIRED)}"
                         f"{near_miss([n for n in vars(cls) if not hasattr(Adapter, n)], missing)}")
    _check_sizes(path, cls)
    _check_signatures(path, cls)
    _check_loader(path, cls)
    return cls


def defines(cls: type[Adapter], name: str) -> bool:
    """Whether the adapter overrides `Adapter.name` (an optional method it may leave out)."""
    return getattr(cls, name) is not getattr(Adapter, name)


def check_loader_args(args: Any, where: str) -> dict[str, Any]:
    """`loader_args()`'s result as a dict, or `InputError` saying what is wrong with it."""
    if not isinstance(args, Mapping):
        raise InputError(f"{where}.loader_args() returned {type(args).__name__}, not a dict; "
                         "return a dict of DataLoader keyword arguments, e.g. "
                         "{'collate_fn': my_collate}")
    for key in args:
        if key in LOADER_KNOBS:
            raise InputError(
                f"{where}.loader_args() sets {key!r}, a knob the tool owns and searches "
                f"({', '.join(LOADER_KNOBS)}); remove it"
                + (" (the baseline uses the adapter's batch_size)" if key == "batch_size" else ""))
        if key in _NOT_LOADER_ARGS:
            raise InputError(f"{where}.loader_args() sets {key!r}: {_NOT_LOADER_ARGS[key]}")
        if not isinstance(key, str):
            raise InputError(f"{where}.loader_args() has the key {key!r}: keys are the "
                             "DataLoader's keyword arguments, as strings")
    return dict(args)


# Each method and the arguments the tool calls it with.
_CALLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dataset": ((), ()),
    "model": ((), ()),
    "optimizer": (("model",), ()),
    "loss": (("model", "batch"), ()),
    "blocks": (("model",), ()),
    "items": (("batch",), ()),
    "loader_args": ((), ()),
    "make_loader": (("dataset",), LOADER_KNOBS),
}


def _check_signatures(path: Path, cls: type[Adapter]) -> None:
    """Each method can be called the way the tool calls it (without calling it)."""
    for name, (args, keywords) in _CALLS.items():
        if not defines(cls, name):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, staticmethod):
            func, bound = attr.__func__, args
        elif isinstance(attr, classmethod):
            func, bound = getattr(cls, name), args
        elif inspect.isfunction(attr):
            func, bound = attr, ("self", *args)
        else:
            raise InputError(f"{path}: {cls.__name__}.{name} is a {type(attr).__name__}, not a "
                             f"method; define `def {name}(self{''.join(', ' + a for a in args)}"
                             f"{', **knobs' if keywords else ''})`")
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):  # a callable inspect cannot read: trust it
            continue
        try:
            signature.bind(*bound, **{k: None for k in keywords})
        except TypeError as exc:
            call = ", ".join((*args, *(f"{k}=..." for k in keywords)))
            raise InputError(
                f"{path}: {cls.__name__}.{name}{signature} cannot be called as "
                f"{name}({call}) ({exc}); define `def {name}(self"
                f"{''.join(', ' + a for a in args)}{', **knobs' if keywords else ''})`"
            ) from None


def _check_loader(path: Path, cls: type[Adapter]) -> None:
    """loader_args or make_loader, not both; loader_args' dict checked (cheap: builds nothing)."""
    if not defines(cls, "loader_args"):
        return
    if defines(cls, "make_loader"):
        raise InputError(f"{path}: {cls.__name__} defines both make_loader and loader_args; "
                         "make_loader builds the whole loader, so loader_args would never be "
                         "used: keep one (pass the arguments inside make_loader)")
    if not readable(cls.knobs):  # loader_args() reading self.params would fail, blaming itself:
        return  # the knobs' own check (study.space.adapter_knobs) names the knob and the fix
    adapter = cls()
    try:
        args = adapter.loader_args()
    except Exception as exc:  # any error in user code: report it with its traceback
        if isinstance(exc, AttributeError) and exc.obj is adapter:
            return  # one dataset() sets, not run here (a sampler of it): the trial checks it
        tb = "".join(traceback.format_exception(exc))
        raise InputError(f"{path}: {cls.__name__}().loader_args() failed:\n{tb}") from None
    check_loader_args(args, f"{path}: {cls.__name__}")


def _check_sizes(path: Path, cls: type[Adapter]) -> None:
    bs, gbs = cls.batch_size, cls.global_batch_size
    if not isinstance(cls.unit, str) or not cls.unit:
        raise InputError(f"{path}: {cls.__name__}.unit must be a non-empty string, got {cls.unit!r}")
    if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
        raise InputError(f"{path}: {cls.__name__}.batch_size must be a positive integer, got {bs!r}")
    for flag in ("vary_global_batch", "samples_interact", "loss_in_model"):
        if not isinstance(getattr(cls, flag), bool):
            raise InputError(f"{path}: {cls.__name__}.{flag} must be True or False, got "
                             f"{getattr(cls, flag)!r}")
    if gbs is None:
        return
    if isinstance(gbs, bool) or not isinstance(gbs, int) or gbs < 1:
        raise InputError(
            f"{path}: {cls.__name__}.global_batch_size must be a positive integer or None, got {gbs!r}"
        )
    if gbs % bs:
        raise InputError(
            f"{path}: {cls.__name__}.global_batch_size={gbs} is not a multiple of batch_size={bs}; "
            "the baseline needs batch_size * grad_accum == global_batch_size"
        )
