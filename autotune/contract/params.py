"""The adapter's own knobs: their values (`Params`) and what the trial side reads of their
declarations (`Adapter.knobs`).

Why a `params` field on `TrainConfig`, not a second object beside it: a config already travels
everywhere a trial's values must go (space -> request -> trial process -> study records ->
trials.csv -> best.yaml -> `load_config` -> `autotune lab`), and it is what the search compares
(duplicates, the OOM wall) and keys compiled graphs by. A field rides all of those paths at
once; a parallel object would have to be threaded through each and could drift from the config
it belongs to. It is not a row of the knob table (`KNOBS`): the tool knows nothing of these
knobs but their declared values, so none of the table's machinery (types, PyTorch's defaults,
CUDA-only values) applies.

The declarations are validated in the parent before any trial runs
(`autotune.study.space.adapter_knobs`, with the space file's own parser); the readers here trust
them, as the trial process may.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

__all__ = ["AFFECTS", "SCALARS", "Built", "Params", "affects", "built_state", "default_params",
           "instantiate", "readable", "restored", "same_dataset"]

AFFECTS = ("loader", "model", "both")
"""What an adapter knob acts on (`affects:`, default "both"): a loader-only knob changes no
compiled graph; a model-only knob leaves the dataset as it was built."""
SCALARS = (type(None), bool, int, float, str)
"""The values a knob may take: what Optuna stores for a categorical, and YAML writes plainly."""

T = TypeVar("T")


class Params(Mapping[str, Any]):
    """An immutable, hashable mapping of an adapter's knob values, ordered by name (equal
    whatever the order they were given in)."""

    __slots__ = ("_items",)

    def __init__(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        items = dict(values)
        for name, value in items.items():
            if not isinstance(name, str) or not isinstance(value, SCALARS):
                raise ValueError(f"adapter knob values are named by strings and are null, true/"
                                 f"false, numbers or strings, got {name!r}: {value!r}")
        self._items = tuple(sorted(items.items(), key=lambda kv: kv[0]))

    def __getitem__(self, name: str) -> Any:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other.items())

    def __repr__(self) -> str:
        return f"Params({dict(self._items)!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> Params:
        return self  # immutable (dataclasses.asdict deep-copies field values)

    def __reduce__(self) -> tuple[type[Params], tuple[tuple[tuple[str, Any], ...]]]:
        return Params, (self._items,)


def default_params(declared: Mapping[str, Any]) -> Params:
    """Each declared knob's `default:`, else its first choice, else the low end of its range:
    the values outside a trial, and the baseline trial's."""
    values, name, entry = {}, None, None
    try:
        for name, entry in declared.items():
            if "default" in entry:
                values[name] = entry["default"]
            elif "choices" in entry:
                values[name] = entry["choices"][0]
            else:
                values[name] = entry["low"]
    except (AttributeError, TypeError, KeyError, IndexError):  # read before the search checks
        which = f"knobs[{name!r}] = {entry!r}" if name is not None else f"knobs = {declared!r}"
        raise ValueError(f"the adapter's {which} cannot be read: each entry is a dict with "
                         "'choices' (a non-empty list) or 'low'/'high' (an int range); "
                         "`autotune search` names what is wrong with it") from None
    return Params(values)


def readable(declared: Any) -> bool:
    """Whether `default_params` can read the declared knobs (their full check is the space's)."""
    try:
        default_params(declared)
    except ValueError:
        return False
    return True


def affects(declared: Mapping[str, Any], name: str) -> str:
    """What knob `name` acts on: its `affects:`, "both" when it does not say."""
    return str(declared[name].get("affects", "both"))


def same_dataset(declared: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    """Whether `dataset()` returns what it returned at the defaults: every knob whose value
    differs from its default acts on the model only. (A fork server built its dataset once,
    at the defaults; a trial whose loader knobs differ builds its own.)"""
    defaults = default_params(declared)
    return all(affects(declared, name) == "model"
               for name, value in params.items() if defaults.get(name) != value)


def instantiate(cls: type[T], params: Mapping[str, Any]) -> T:
    """An instance of the adapter class `cls` whose `params` hold `params` over the defaults
    from before its `__init__` runs (an `__init__` may read them too). A knob the adapter does
    not declare is a `ValueError`: a YAML tuned for another version of the adapter."""
    declared: Mapping[str, Any] = getattr(cls, "knobs", {})
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ValueError(f"{cls.__name__} declares no knob(s) {unknown} (its knobs: "
                         f"{sorted(declared)}); was the config tuned for another adapter?")
    adapter = cls.__new__(cls)
    adapter.__dict__["_params"] = Params({**default_params(declared), **params})
    adapter.__init__()  # type: ignore[misc]  # the tool calls adapters with no arguments
    return adapter


def built_state(adapter: Any, build: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """What `build` (a method of `adapter`, its `dataset`) returns, and the attributes it set on
    `adapter`: new, rebound, or a list, dict or set changed in place. A trial that reuses the
    dataset built elsewhere sets them on its own adapter where its `dataset()` would have run
    (`restored`), so that its later methods find them (a length-grouped sampler built in
    `loader_args` from `self._ds`, kept by `dataset()`: a held-out user's, 2026-11-28)."""
    before = {k: (v, _shallow(v)) for k, v in vars(adapter).items()}
    built = build()

    def changed(k: str, v: Any) -> bool:
        if k not in before:
            return True
        old, copied = before[k]
        return old is not v or (copied is not None and copied != v)

    return built, {k: v for k, v in vars(adapter).items() if k != "_params" and changed(k, v)}


def _shallow(value: Any) -> Any:
    """A shallow copy of a list, dict or set (to see it changed in place), else None."""
    return type(value)(value) if type(value) in (list, dict, set) else None


@dataclasses.dataclass(frozen=True)
class Built:
    """A dataset built on another adapter (a fork server's), with what `dataset()` set there."""

    dataset: Any
    state: dict[str, Any]


def restored(adapter: Any, dataset: Any) -> Any:
    """The dataset to load from: a `Built` one's, its state set on `adapter` first; else
    `dataset` itself."""
    if isinstance(dataset, Built):
        vars(adapter).update(dataset.state)
        return dataset.dataset
    return dataset
