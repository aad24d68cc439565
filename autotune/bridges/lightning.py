"""An adapter from a Lightning `LightningModule` and `LightningDataModule`, unchanged::

    from autotune.bridges.lightning import LightningAdapter

    class MyAdapter(LightningAdapter):
        module = MyLitModule          # training_step is the loss, configure_optimizers the optimizer
        datamodule = MyDataModule     # train_dataloader() gives the dataset and the loader's args

The datamodule is built (`prepare_data`, `setup("fit")`) and its `train_dataloader()` asked for
the dataset and what it loads with (collate_fn, sampler or shuffle, drop_last, ...); the tool's
loader knobs replace its batch size, workers, prefetching, pinning and persistence. The module's
`training_step(batch, batch_idx)` runs with no Trainer: `self.log` does nothing, and hooks other
than `configure_model` are not called. One optimizer (automatic optimization); a scheduler from
`configure_optimizers` is ignored (it changes no step's cost). Lightning itself is not imported:
the classes are used through the methods named here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from autotune.adapter import Adapter

__all__ = ["LightningAdapter"]

# The train loader each dataset came from (by the dataset's id), so that make_loader, called
# with the dataset in the same process or a fork of it, loads what the datamodule's loader did.
_TEMPLATES: dict[int, dict[str, Any]] = {}


class LightningAdapter(Adapter):
    """Set `module` and `datamodule` (classes; their keyword arguments in `module_kwargs` and
    `datamodule_kwargs`). `batch_size` defaults to the datamodule's: its `datamodule_kwargs`
    entry or its `__init__` default; set it when neither exists."""

    loss_in_model: ClassVar[bool] = True  # `loss` runs training_step under the model's compiler
    module: ClassVar[type | None] = None
    """A LightningModule class: `training_step` and `configure_optimizers` are used."""
    datamodule: ClassVar[type | None] = None
    """A LightningDataModule class: `train_dataloader()` gives the dataset and loader args."""
    module_kwargs: ClassVar[Mapping[str, Any]] = {}
    datamodule_kwargs: ClassVar[Mapping[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("module", "datamodule"):
            if not inspect.isclass(getattr(cls, name)):
                raise TypeError(
                    f"{cls.__name__}: set `{name} = ...` to your Lightning"
                    f"{'Module' if name == 'module' else 'DataModule'} class (the class, not an "
                    f"instance), got {getattr(cls, name)!r}")
        if "batch_size" not in cls.__dict__:
            size = _datamodule_batch_size(cls)
            if size is not None:
                cls.batch_size = size

    # -- the adapter contract ------------------------------------------------------------------

    def dataset(self) -> Any:
        assert self.datamodule is not None  # checked when the subclass was defined
        dm = self.datamodule(**self.datamodule_kwargs)
        dm.prepare_data()
        dm.setup("fit")
        loader = dm.train_dataloader()
        args = _loader_args(loader)  # first: a batch sampler is refused with its own fix
        if loader.batch_size != self.batch_size:
            raise ValueError(
                f"{type(dm).__name__}.train_dataloader() batches {loader.batch_size}, the "
                f"adapter {self.batch_size}: set `batch_size = {loader.batch_size}` on "
                f"{type(self).__name__} (the baseline trains what you train)")
        _TEMPLATES[id(loader.dataset)] = args
        return loader.dataset

    def make_loader(self, dataset: Any, **knobs: Any) -> Any:
        from torch.utils.data import DataLoader

        args = _TEMPLATES.get(id(dataset))
        if args is None:  # dataset() ran elsewhere: ask the datamodule again
            self.dataset()
            args = _TEMPLATES.get(id(dataset), {})
        if knobs["num_workers"] == 0:
            args = {k: v for k, v in args.items() if k != "multiprocessing_context"}
        return DataLoader(dataset, **args, **knobs)

    def model(self) -> Any:
        assert self.module is not None
        module = self.module(**self.module_kwargs)
        hook = getattr(module, "configure_model", None)
        if callable(hook):
            hook()  # Lightning's hook for building layers lazily
        # No Trainer records anything: logging costs nothing and warns nothing.
        module.log = _no_log
        module.log_dict = _no_log
        return module

    def optimizer(self, model: Any) -> Any:
        return _one_optimizer(model.configure_optimizers(), type(model).__name__)

    def loss(self, model: Any, batch: Any) -> Any:
        # torch.compile wraps the module; training_step is the module's own method, so run it
        # under the same compiler settings (Lightning too compiles a compiled module's code).
        module = getattr(model, "_orig_mod", model)
        step = getattr(self, "_step", None)
        if step is None or self._stepped is not model:
            ctx = getattr(model, "dynamo_ctx", None)
            step = ctx(module.training_step) if ctx is not None else module.training_step
            self._step, self._stepped, self._batch_idx = step, model, 0
        out = step(batch, self._batch_idx)
        self._batch_idx += 1
        if isinstance(out, Mapping):
            out = out.get("loss")
        if out is None:
            raise TypeError(
                f"{type(module).__name__}.training_step returned no loss: manual optimization "
                "(automatic_optimization = False) cannot be timed by autotune; return the loss, "
                "or a dict with 'loss'")
        return out


def _no_log(*args: Any, **kwargs: Any) -> None:
    return None


def _datamodule_batch_size(cls: type[LightningAdapter]) -> int | None:
    """The datamodule's batch size without building it: its keyword argument, else its
    `__init__` default."""
    if "batch_size" in cls.datamodule_kwargs:
        return cls.datamodule_kwargs["batch_size"]
    try:
        param = inspect.signature(cls.datamodule).parameters.get("batch_size")
    except (TypeError, ValueError):
        return None
    if param is None or param.default is inspect.Parameter.empty:
        return None
    return param.default


def _loader_args(loader: Any) -> dict[str, Any]:
    """What a DataLoader loads with, less the knobs the tool sets."""
    from torch.utils.data import IterableDataset

    if getattr(loader, "batch_size", None) is None:
        raise ValueError(
            "the datamodule's train_dataloader() uses a batch_sampler (or batch_size=None): the "
            "tool varies the batch size, so give a sampler and a batch_size instead")
    args: dict[str, Any] = {
        "collate_fn": loader.collate_fn,
        "drop_last": loader.drop_last,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "generator": loader.generator,
    }
    if not isinstance(loader.dataset, IterableDataset):
        args["sampler"] = loader.sampler  # RandomSampler for shuffle=True: the same order law
    if loader.multiprocessing_context is not None:
        args["multiprocessing_context"] = loader.multiprocessing_context
    return args


def _one_optimizer(found: Any, where: str) -> Any:
    """The optimizer of every form `configure_optimizers` may return."""
    if isinstance(found, Mapping):
        found = found.get("optimizer")
    elif isinstance(found, Sequence) and len(found) == 2 and isinstance(found[0], Sequence) \
            and isinstance(found[1], Sequence):
        found = found[0]  # ([optimizers], [schedulers])
    if isinstance(found, Sequence) and not isinstance(found, (str, bytes)):
        opts = [o.get("optimizer") if isinstance(o, Mapping) else o for o in found]
        if len(opts) != 1:
            raise ValueError(
                f"{where}.configure_optimizers returned {len(opts)} optimizers: autotune times "
                "automatic optimization with one optimizer")
        found = opts[0]
    if found is None or not hasattr(found, "step") or not hasattr(found, "zero_grad"):
        raise TypeError(f"{where}.configure_optimizers returned no optimizer (got {found!r})")
    return found
