"""A search space bound to one adapter and device: conditions, knobs, and sampling into configs.

`autotune.study.space.file` reads and validates the YAML files and builds these objects.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from autotune.contract.config import KNOBS, TrainConfig

if TYPE_CHECKING:
    import optuna

__all__ = ["OPS", "Condition", "Knob", "SearchSpace"]

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<=": operator.le, ">=": operator.ge,
    "<": operator.lt, ">": operator.gt,
    "not in": lambda a, b: a not in b, "in": lambda a, b: a in b,
}


@dataclasses.dataclass(frozen=True)
class Condition:
    """`knob op value`, e.g. `num_workers > 0`."""

    knob: str
    op: str
    value: Any

    def holds(self, values: Mapping[str, Any]) -> bool:
        try:
            return bool(OPS[self.op](values[self.knob], self.value))
        except TypeError:  # e.g. None > 0 for an inactive knob: the condition does not hold
            return False

    def __str__(self) -> str:
        return f"{self.knob} {self.op} {self.value!r}"


@dataclasses.dataclass(frozen=True)
class Knob:
    """One searched knob: a list of choices or an int range, and when it applies."""

    name: str
    choices: tuple[Any, ...] | None = None
    low: int | None = None
    high: int | None = None
    log: bool = False
    when: tuple[Condition, ...] = ()
    affects: str | None = None
    """None: a knob of the tool; else the adapter's own, and what it acts on (loader, model,
    both). Its value lives in the config's `params`."""

    def active(self, values: Mapping[str, Any]) -> bool:
        return all(c.holds(values) for c in self.when)

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        assert self.low is not None and self.high is not None  # set together by the parser
        return trial.suggest_int(self.name, self.low, self.high, log=self.log)

    def contains(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        assert self.low is not None and self.high is not None
        return self.low <= value <= self.high

    def describe(self) -> str:
        domain = (
            "{" + ", ".join(map(str, self.choices)) + "}"
            if self.choices is not None
            else f"[{self.low}, {self.high}]" + (" log" if self.log else "")
        )
        cond = f" when {' and '.join(map(str, self.when))}" if self.when else ""
        return f"{self.name} ∈ {domain}{cond}"


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """A space bound to one adapter and device: knobs in sampling order, plus fixed values."""

    source: str
    knobs: tuple[Knob, ...]
    baseline: TrainConfig
    """PyTorch's defaults at the adapter's batch size: trial 0 of every study."""
    global_batch_size: int | None = None

    @property
    def loader_only(self) -> frozenset[str]:
        """The adapter's knobs declared `affects: loader`: they change no compiled graph."""
        return frozenset(k.name for k in self.knobs if k.affects == "loader")

    def suggest(self, trial: optuna.Trial) -> TrainConfig:
        """Sample a config: each knob whose conditions hold, in dependency order."""
        values = _flat(self.baseline.to_dict())
        for knob in self.knobs:
            if knob.active(values):
                values[knob.name] = knob.suggest(trial)
        return self._finish(values)

    def config_from_params(self, params: Mapping[str, Any]) -> TrainConfig:
        """The config a trial with these Optuna params ran (inactive knobs at their defaults)."""
        values = _flat(self.baseline.to_dict())
        for knob in self.knobs:
            if knob.active(values) and knob.name in params:
                values[knob.name] = params[knob.name]
        return self._finish(values)

    def values(self, name: str) -> tuple[Any, ...]:
        """The values this space samples for a knob (the baseline's when it is not searched)."""
        knob = next((k for k in self.knobs if k.name == name), None)
        if knob is None:
            return (self.baseline.params[name] if name in self.baseline.params
                    else getattr(self.baseline, name),)
        if knob.choices is not None:
            return tuple(knob.choices)
        assert knob.low is not None and knob.high is not None
        return tuple(range(knob.low, knob.high + 1))

    def batch_sizes(self) -> tuple[int, ...]:
        return self.values("batch_size")

    def with_batch(self, config: TrainConfig, batch_size: int) -> TrainConfig:
        """`config` at another batch size (accumulation follows a global batch size)."""
        return self._finish({**config.to_dict(), "batch_size": batch_size})

    def holds(self, config: TrainConfig) -> bool:
        """Whether `suggest` could return `config`."""
        params = self.params_for(config)
        by_name = {k.name: k for k in self.knobs}
        if any(not by_name[name].contains(value) for name, value in params.items()):
            return False
        return self.config_from_params(params) == config

    def params_for(self, config: TrainConfig) -> dict[str, Any]:
        """The Optuna params that make `suggest` return `config` (for enqueueing it)."""
        # A config built without the adapter's knobs (a recipe) reads as their defaults.
        values = {**_flat(self.baseline.to_dict()), **_flat(config.to_dict())}
        return {k.name: values[k.name] for k in self.knobs if k.active(values)}

    def changed(self, config: TrainConfig, **changes: Any) -> TrainConfig:
        """`config` with `changes`, projected into the space: knobs that no longer apply at
        their defaults (no prefetching without workers), knobs that now apply at the space's
        nearest value, accumulation derived from a global batch size."""
        return self._project({**config.to_dict(), **changes})

    def _finish(self, values: dict[str, Any]) -> TrainConfig:
        params = dict(values.pop("params", None) or {})  # the adapter's own knobs, flat or not
        params.update({name: values.pop(name) for name in self.baseline.params if name in values})
        values["params"] = params
        for spec in KNOBS:  # a knob that does not apply (prefetch without workers) is at its default
            if not spec.applies(values):
                values[spec.name] = spec.default
        if self.global_batch_size is not None:
            values["grad_accum"] = self.global_batch_size // values["batch_size"]
        return TrainConfig(**values)

    def describe(self) -> list[str]:
        return [k.describe() for k in self.knobs]

    def enumerate(self) -> list[TrainConfig]:
        """Every distinct config `suggest` can return (the full grid), in a stable order."""
        partial: list[dict[str, Any]] = [_flat(self.baseline.to_dict())]
        for knob in self.knobs:
            grown = []
            for values in partial:
                if knob.active(values):
                    grown += [{**values, knob.name: v} for v in self.values(knob.name)]
                else:
                    grown.append(values)
            partial = grown
        return list(dict.fromkeys(self._finish(dict(v)) for v in partial))

    def project(self, config: TrainConfig) -> TrainConfig:
        """The config of this space nearest to `config`: each searched knob keeps its value when
        the space has it, else takes the space's nearest (numbers) or first value; knobs the
        space does not search stay at the baseline's."""
        return self._project(config.to_dict())

    def _project(self, wanted: dict[str, Any]) -> TrainConfig:
        values, wanted = _flat(self.baseline.to_dict()), _flat(wanted)
        for knob in self.knobs:
            if not knob.active(values):
                continue
            options = self.values(knob.name)
            value = wanted.get(knob.name, values[knob.name])  # a recipe leaves the adapter's
            # The nearest number; a null among the options (PyTorch's default) is not a number.
            numbers = [o for o in options if o is not None]
            if value in options:
                values[knob.name] = value
            elif _number(value) and numbers and all(_number(o) for o in numbers):
                values[knob.name] = min(numbers, key=lambda o: (abs(o - value), -o))
            else:
                values[knob.name] = options[0]
        return self._finish(values)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flat(values: dict[str, Any]) -> dict[str, Any]:
    """A config's values with the adapter's knobs beside the tool's (their names never clash:
    `adapter_knobs` refuses a tool knob's name), as conditions and Optuna read them. One given
    flat (`changed(config, pad=64)`) wins over the config's."""
    return {**(values.get("params") or {}), **{k: v for k, v in values.items() if k != "params"}}
