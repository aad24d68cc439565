"""A space file's `when:` conditions: a small grammar (`KNOB OP VALUE`, joined by `and`), parsed
with `yaml.safe_load` for the values and never evaluated as Python; each value checked against
the knob's table, and the knobs put in an order where a condition reads only knobs sampled
before it. Every error names the file, the key and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

from autotune.contract.config import KNOB
from autotune.contract.errors import InputError
from autotune.study.space.bound import OPS, Condition, Knob

__all__ = ["dependency_order", "parse_when"]

_CONDITION = re.compile(r"^\s*([A-Za-z_]\w*)\s*(==|!=|<=|>=|<|>|not\s+in|in)\s*(.+?)\s*$")


def parse_when(raw: Any, where: str) -> tuple[Condition, ...]:
    if raw is None:
        return ()
    if isinstance(raw, list):
        parts = raw
    elif isinstance(raw, str):
        parts = re.split(r"\s+and\s+", raw, flags=re.IGNORECASE)
    else:
        raise InputError(f"{where}.when: expected a string like \"num_workers > 0\", got {raw!r}")
    conditions = []
    for part in parts:
        match = _CONDITION.match(part) if isinstance(part, str) else None
        if match is None:
            raise InputError(
                f"{where}.when: cannot parse {part!r}; write KNOB OP VALUE with OP one of "
                f"{', '.join(OPS)}, joined by 'and'"
            )
        knob, op, text = match.groups()
        op = " ".join(op.split())
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise InputError(f"{where}.when: cannot read the value {text!r} in {part!r}") from None
        if op in ("in", "not in") and not isinstance(value, list):
            raise InputError(f"{where}.when: '{op}' needs a list like [a, b], got {text!r}")
        if knob in KNOB:
            _check_condition_value(knob, value if isinstance(value, list) else [value], where, part)
        conditions.append(Condition(knob, op, value))
    return tuple(conditions)


def _check_condition_value(knob: str, values: Sequence[Any], where: str, part: str) -> None:
    spec = KNOB[knob]
    for value in values:
        if spec.allowed is not None and value not in spec.allowed:
            raise InputError(
                f"{where}.when: in {part!r}, {value!r} is not a value of {knob}; allowed: "
                f"{list(spec.allowed)}"
            )
        if value is None and (spec.nullable or spec.needs_workers):
            continue
        numeric = spec.kind in (int, float) and not isinstance(value, bool) and isinstance(
            value, (int, float))
        if not (numeric or isinstance(value, spec.kind)):
            kind = {int: "an integer", float: "a number", bool: "true or false",
                    str: "a string"}[spec.kind]
            raise InputError(
                f"{where}.when: in {part!r}, {knob} is compared with {value!r}, but its values "
                f"are {kind}"
            )


def dependency_order(knobs: list[Knob], names: set[str], source: str) -> list[Knob]:
    """Dependency order: a knob after every searched knob its conditions read."""
    rank = {name: i for i, name in enumerate(tuple(KNOB))}
    pending = sorted(knobs, key=lambda k: rank.get(k.name, len(rank)))  # the adapter's last
    ordered: list[Knob] = []
    done: set[str] = set()
    while pending:
        ready = [k for k in pending if all(c.knob in done or c.knob not in names for c in k.when)]
        if not ready:
            cycle = ", ".join(k.name for k in pending)
            raise InputError(f"{source}: the 'when' conditions of {cycle} depend on each other in a cycle")
        ordered.append(ready[0])
        done.add(ready[0].name)
        pending.remove(ready[0])
    return ordered
