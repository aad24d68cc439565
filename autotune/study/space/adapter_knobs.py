"""The adapter's own knobs in a space: its declarations (`Adapter.knobs`), read with the space
file's own parser (`file._parse_knob`, handed in: one grammar for both), and the space file's
`adapter:` entries, which replace the adapter's entry of the same name (keeping its
`affects:` unless they give one)::

    class MyAdapter(autotune.Adapter):
        knobs = {"pad_to_multiple_of": {"choices": [None, 64, 1024], "affects": "loader"},
                 "attn": {"choices": ["sdpa", "eager"], "affects": "model"}}

    # space.yaml: only the fixed-length padding, for CUDA graphs
    adapter:
      pad_to_multiple_of: {choices: [1024]}

Each entry is an entry of a space file (`choices:`, or an int range `low:`/`high:`/`log:`; an
optional `when:` that may read the tool's knobs and the adapter's) plus two fields of its own:
`affects:` loader | model | both (default both: what the search may assume about it) and
`default:` (else the first choice, or `low`): the value outside a trial, and trial 0's. Values
are null, true/false, numbers or strings (what Optuna stores). Wrong declarations raise
`InputError` naming the adapter file, the knob and the fix, when the space is bound: before any
trial runs.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from autotune.contract.config import KNOB
from autotune.contract.errors import InputError
from autotune.contract.knobs import KnobSpec
from autotune.contract.params import AFFECTS, SCALARS, Params
from autotune.study.space.bound import Knob

if TYPE_CHECKING:
    from autotune.adapter import Adapter

__all__ = ["Parse", "own_knobs"]

Parse = Callable[[str, Mapping[str, Any], KnobSpec, str], Knob]
"""The space file's entry parser: (name, entry, the knob's spec, where) -> a `Knob`."""

_FIELDS = {"choices", "low", "high", "log", "when", "affects", "default"}
_RESERVED = {"params", "adapter", "description"}  # keys of a config or a space file
_NAME = re.compile(r"^[A-Za-z_]\w*$")  # what a `when:` condition can name


def own_knobs(adapter: type[Adapter], overrides: Any, *, source: str, parse: Parse
              ) -> tuple[list[Knob], Params]:
    """The adapter's knobs as searched knobs (in declaration order), and their defaults."""
    cls = f"{_file(adapter)}: {adapter.__name__}.knobs"
    declared = adapter.knobs
    if not isinstance(declared, Mapping):
        raise InputError(f"{cls}: must be a dict of knob name -> entry, like "
                         f"{{'pad_to_multiple_of': {{'choices': [None, 64]}}}}, got "
                         f"{type(declared).__name__}")
    entries: dict[str, tuple[Mapping[str, Any], str]] = {}
    for name, entry in declared.items():
        where = f"{cls}[{name!r}]"
        _check_name(name, where)
        entries[name] = (_mapping(entry, where), where)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise InputError(f"{source}: key 'adapter' must map the adapter's knobs to entries, got "
                         f"{overrides!r}")
    for name, entry in (overrides or {}).items():
        where = f"{source}: key 'adapter.{name}'"
        if name not in entries:
            raise InputError(f"{where}: {adapter.__name__} ({_file(adapter)}) declares no knob "
                             f"{name!r}; its knobs: {sorted(entries) or 'none'}")
        entry = dict(_mapping(entry, where))
        entry.setdefault("affects", entries[name][0].get("affects", "both"))
        entries[name] = (entry, where)
    knobs, defaults = [], {}
    for name, (entry, where) in entries.items():
        knob, defaults[name] = _own_knob(name, entry, where, parse)
        knobs.append(knob)
    for knob in knobs:
        for cond in knob.when:
            if cond.knob == knob.name or cond.knob not in KNOB and cond.knob not in entries:
                raise InputError(
                    f"{entries[knob.name][1]}.when: {cond.knob!r} in '{cond}' is neither a knob "
                    f"of the tool nor another of the adapter's ({sorted(entries)}); a knob "
                    "cannot depend on itself")
    return knobs, Params(defaults)


def _own_knob(name: str, entry: Mapping[str, Any], where: str, parse: Parse) -> tuple[Knob, Any]:
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(_FIELDS)}")
    affects = entry.get("affects", "both")
    if affects not in AFFECTS:
        raise InputError(f"{where}: affects must be one of {list(AFFECTS)} (what the value "
                         f"changes: the batches, the model and its step, or both), got "
                         f"{affects!r}")
    choices = entry.get("choices")
    for value in choices if isinstance(choices, list) else ():
        if not isinstance(value, SCALARS):
            raise InputError(f"{where}: choices are null, true/false, numbers or strings, got "
                             f"{value!r}; name each variant by a string and build it in the "
                             "adapter")
    if isinstance(choices, list):
        keys = [(type(v), v) for v in choices]
        alike = [v for v, k in zip(choices, keys) if sum(k2[1] == k[1] for k2 in keys) > 1
                 and sum(k2 == k for k2 in keys) == 1]
        if alike:  # True == 1 == 1.0 in Python: one would silently stand for the other
            raise InputError(f"{where}: choices {alike} are equal in Python but of different "
                             "types (true and 1, 1 and 1.0); keep one of each")
    domain = {k: v for k, v in entry.items() if k not in ("affects", "default")}
    # Any listed value is one of the knob's own: the parser's type checks are the tool's.
    spec = KnobSpec(name=name, allowed=tuple(choices) if isinstance(choices, list) else None)
    knob = dataclasses.replace(parse(name, domain, spec, where), affects=affects)
    if "default" not in entry:
        return knob, knob.choices[0] if knob.choices is not None else knob.low
    default = entry["default"]
    whole = knob.choices is not None or (isinstance(default, int)
                                         and not isinstance(default, bool))
    if not isinstance(default, SCALARS) or not whole or not knob.contains(default):
        raise InputError(f"{where}: default {default!r} is not among its values "
                         f"({knob.describe()}); add it, or drop `default:` (the first value)")
    return knob, default


def _check_name(name: Any, where: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
        raise InputError(f"{where}: a knob's name is an identifier (letters, digits, _) other "
                         f"than {sorted(_RESERVED)}; rename it")
    if name in KNOB:
        raise InputError(f"{where}: {name!r} is a knob of the tool; rename yours (to search the "
                         f"tool's {name}, list it in the space file)")


def _mapping(entry: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(entry, Mapping):
        raise InputError(f"{where}: expected an entry like {{'choices': [...]}} or "
                         f"{{'low': 1, 'high': 8}}, got {entry!r}")
    return entry


def _file(adapter: type[Any]) -> str:
    """The adapter's file (`load_adapter` imported it as a module of its own)."""
    module = sys.modules.get(adapter.__module__)
    return str(getattr(module, "__file__", None) or adapter.__module__)
