"""The space file: `search_spaces/*.yaml`, read, validated and bound to an adapter (`bound`).

A space file maps knob names to a domain and an optional condition::

    num_workers: {low: 0, high: cores}          # int range; "cores" = CPUs this process may use
    prefetch_factor: {choices: [2, 4, 8]}       # only sampled when num_workers > 0 (built in)
    batch_size: {factors: [0.5, 1, 2]}          # multiples of the adapter's batch_size
    compile: {choices: [none, default], when: "amp_dtype != fp32"}
    adapter:                                    # the adapter's own knobs (`Adapter.knobs`),
      pad_to_multiple_of: {choices: [1024]}     # narrowed or replaced (`adapter_knobs`)

Read with `yaml.safe_load`; conditions by a small grammar (`KNOB OP VALUE`, joined by `and`),
never evaluated. Every error names the file, the key and what is allowed, before any trial runs.
Impossible combinations (prefetch without workers, a batch not dividing the global one) never run.

By default every config keeps the adapter's effective batch (`global_batch_size`, else
`batch_size`): the micro-batch takes the space's sizes that divide it and `grad_accum` follows,
so an optimizer step computes what it computed before tuning. `vary_global_batch` (the adapter's
attribute or `--vary-global-batch`) searches batch sizes and accumulation freely instead.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from autotune.contract.config import KNOB, TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.host import available_cpus
from autotune.contract.knobs import KnobSpec
from autotune.study.space.adapter_knobs import own_knobs
from autotune.study.space.bound import Condition, Knob, SearchSpace
from autotune.study.space.conditions import dependency_order, parse_when
from autotune.study.space.interacting import keep_micro_batch

if TYPE_CHECKING:

    from autotune.adapter import Adapter

__all__ = ["Condition", "Knob", "SearchSpace", "builtin_spaces", "find_space", "load_space"]

# In a source checkout the spaces sit beside the package; an installed package carries a copy.
_PACKAGE = Path(__file__).resolve().parents[2]  # autotune/ (this is autotune/study/space/file.py)
SPACES_DIRS = (_PACKAGE.parent / "search_spaces", _PACKAGE / "search_spaces")


KNOB_NAMES = tuple(KNOB)

def builtin_spaces() -> list[str]:
    """The names `find_space` knows without a path ("cpu", "default", "full", ...)."""
    return sorted({p.stem for folder in SPACES_DIRS for p in folder.glob("*.yaml")})


def find_space(name_or_path: str) -> Path:
    """A path to a space file, or the name of one in `search_spaces/` ("default", "cpu")."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not path.is_file():
            raise InputError(f"--space {name_or_path}: file not found")
        return path
    for folder in SPACES_DIRS:
        candidate = folder / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    raise InputError(
        f"--space {name_or_path}: no such space; built-in spaces are {builtin_spaces()}, or pass "
        "a path to a .yaml file"
    )


def load_space(
    path: str | Path,
    *,
    adapter: type[Adapter],
    device_type: str,
    cpus: int | None = None,
    vary_global_batch: bool = False,
    nproc: int = 1,
) -> SearchSpace:
    """Read, validate and bind a space file; raise `InputError` naming the file and key.
    `vary_global_batch` (or the adapter's attribute of that name) lets the effective batch vary;
    the DDP knobs are searched only for trials of `nproc` > 1 ranks."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; save the search space as UTF-8 YAML") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the search space ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
    return parse_space(raw, source=str(path), adapter=adapter, device_type=device_type,
                       cpus=available_cpus() if cpus is None else cpus,
                       vary_global_batch=vary_global_batch, nproc=nproc)


def parse_space(
    raw: Any, *, source: str, adapter: type[Adapter], device_type: str, cpus: int,
    vary_global_batch: bool = False, nproc: int = 1,
) -> SearchSpace:
    if not isinstance(raw, Mapping) or not raw:
        raise InputError(
            f"{source}: a search space is a mapping of knob names to domains; known knobs: "
            f"{', '.join(KNOB_NAMES)}"
        )
    baseline = TrainConfig.baseline(adapter.batch_size, adapter.global_batch_size)
    # The effective batch every config keeps; None when the search may change it.
    fixed = None if vary_global_batch or adapter.vary_global_batch else baseline.effective_batch
    own, params = own_knobs(adapter, raw.get("adapter"), source=source, parse=functools.partial(
        _parse_knob, source=source, adapter=adapter, cpus=cpus, fixed=fixed, baseline=baseline))
    baseline = baseline.replace(params=params)  # trial 0 runs the adapter's defaults too
    base_values = {**baseline.to_dict(), **params}
    knobs = []
    for name, body in raw.items():
        if name in ("description", "adapter"):  # `adapter:` the adapter's own (adapter_knobs)
            continue
        if name not in KNOB:
            raise InputError(
                f"{source}: unknown knob {name!r}; known knobs: {', '.join(KNOB_NAMES)}"
            )
        if fixed is not None and name == "grad_accum":
            continue  # derived: effective batch // batch_size
        if name == "compile_scope" and adapter.loss_in_model:
            continue  # compiling the model compiles the loss already: one graph either way
        knob = _parse_knob(name, body, source=source, adapter=adapter, cpus=cpus, fixed=fixed,
                           baseline=baseline)
        _check_device(knob, source, device_type)
        knobs.append(knob)
    for knob in knobs:
        for cond in knob.when:
            if cond.knob not in KNOB and cond.knob not in params:
                raise InputError(
                    f"{source}: key '{knob.name}.when': unknown knob {cond.knob!r} in condition "
                    f"'{cond}'; known knobs: {', '.join(KNOB_NAMES)}"
                )
            if cond.knob == knob.name:
                raise InputError(f"{source}: key '{knob.name}.when': a knob cannot depend on itself")
    for knob in knobs:
        # A knob that applies only with a compile is not active at the baseline, but a config
        # made compiled from an eager one carries its default all the same.
        compiled = KNOB[knob.name].needs_compile
        if (knob.active(base_values) or compiled) and not knob.contains(base_values[knob.name]):
            default = "null" if base_values[knob.name] is None else repr(base_values[knob.name])
            why = ("a config compiled from an eager one has it" if compiled else
                   "trial 0 measures the defaults as the baseline")
            raise InputError(
                f"{source}: key '{knob.name}' must include PyTorch's default {default}: {why}")
    if nproc == 1:  # validated above, but one process has no gradients to all-reduce
        knobs = [k for k in knobs if not KNOB[k.name].ddp]
    knobs = keep_micro_batch(knobs, adapter, baseline, fixed) + own
    names = {k.name for k in knobs}
    return SearchSpace(
        source=source,
        knobs=tuple(dependency_order(knobs, names, source)),
        baseline=baseline,
        global_batch_size=fixed,
    )


def _parse_knob(name: str, body: Any, spec: KnobSpec | None = None, where: str = "", *,
                source: str, adapter: type[Adapter], cpus: int, fixed: int | None,
                baseline: TrainConfig) -> Knob:
    """One entry; `spec` and `where` given for an adapter's own knob (`adapter_knobs`)."""
    spec = spec or KNOB[name]
    where = where or f"{source}: key '{name}'"
    if not isinstance(body, Mapping):
        raise InputError(f"{where}: expected a mapping like {{choices: [...]}}, got {body!r}")
    allowed_keys = {"choices", "when"} | ({"low", "high", "log"} if spec.ranges else set())
    if name == "batch_size":
        allowed_keys.add("factors")
    unknown = sorted(set(body) - allowed_keys)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed_keys)}")
    when = parse_when(body.get("when"), where)
    if spec.needs_workers:
        when = (Condition("num_workers", ">", 0), *when)
    if spec.needs_compile:
        when = (Condition("compile", "!=", "none"), *when)
    forms = [k for k in ("choices", "factors", "low") if k in body]
    if len(forms) != 1:
        how = "'choices'" + (", 'factors'" if name == "batch_size" else "") + (
            " or 'low'/'high'" if spec.ranges else "")
        raise InputError(f"{where}: give exactly one of {how}")

    if "low" in body:
        low, high = _bound(body, "low", where, cpus), _bound(body, "high", where, cpus)
        if low > high:
            raise InputError(f"{where}: low={low} is greater than high={high}; swap them")
        if low < (spec.minimum or 0):
            raise InputError(f"{where}: low must be at least {spec.minimum or 0:g}, got {low}")
        log = body.get("log", False)
        if not isinstance(log, bool):
            raise InputError(f"{where}: 'log' must be true or false, got {log!r}")
        if log and low < 1:
            raise InputError(f"{where}: a log range needs low >= 1, got {low}")
        if name == "batch_size" and fixed is not None:
            divisors = tuple(b for b in range(low, high + 1) if fixed % b == 0)
            return Knob(name, choices=_nonempty(divisors, where, fixed, adapter), when=when)
        return Knob(name, low=low, high=high, log=log, when=when)

    if "factors" in body:
        factors = _list(body["factors"], where, "factors")
        values = []
        for f in factors:
            if isinstance(f, bool) or not isinstance(f, (int, float)) or f <= 0:
                raise InputError(f"{where}: factors must be positive numbers, got {f!r}")
            size = adapter.batch_size * f
            if size < 1 or size != int(size):
                raise InputError(
                    f"{where}: factor {f} times the adapter's batch_size {adapter.batch_size} is "
                    f"{size:g}, not a whole batch size"
                )
            values.append(int(size))
        choices = tuple(dict.fromkeys(values))
    else:
        choices = tuple(_check_value(v, spec, where) for v in _list(body["choices"], where, "choices"))
        choices = tuple(dict.fromkeys(choices))
    if name == "intra_op_threads":  # more than the CPUs it may use: 466 images/s vs 7.6k
        choices = tuple(c for c in choices if c is None or c <= cpus)  # (2-CPU VM, 4 threads)
    if name == "batch_size" and fixed is not None:
        # Sizes that do not divide the effective batch (larger ones included) cannot keep it.
        choices = _nonempty(tuple(b for b in choices if fixed % b == 0), where, fixed, adapter)
    # The baseline's batch and accumulation are always measurable.
    if name == "batch_size" and adapter.batch_size not in choices:
        choices = (adapter.batch_size, *choices)
    if name == "grad_accum" and baseline.grad_accum not in choices:
        choices = (baseline.grad_accum, *choices)
    return Knob(name, choices=choices, when=when)


def _nonempty(divisors: tuple[int, ...], where: str, fixed: int, adapter: type[Adapter]
              ) -> tuple[int, ...]:
    if not divisors:
        which = "global_batch_size" if adapter.global_batch_size else "batch_size"
        raise InputError(
            f"{where}: no value divides the effective batch the search keeps (the adapter's "
            f"{which}={fixed}); include divisors of it, or pass --vary-global-batch (or set "
            "vary_global_batch = True in the adapter) to search other effective batches"
        )
    return divisors


def _list(value: Any, where: str, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{where}: '{field}' must be a list, got {value!r}")
    if not value:
        raise InputError(f"{where}: '{field}' is empty; list at least one value")
    return value


def _bound(body: Mapping[str, Any], field: str, where: str, cpus: int) -> int:
    if field not in body:
        raise InputError(f"{where}: a range needs both 'low' and 'high'; '{field}' is missing")
    value = body[field]
    if value == "cores":
        return cpus
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: '{field}' must be an integer (or 'cores'), got {value!r}")
    return value


def _check_value(value: Any, spec: KnobSpec, where: str) -> Any:
    if value is None and spec.nullable:
        return None
    if spec.allowed is not None:
        if value not in spec.allowed:
            raise InputError(f"{where}: {value!r} is not allowed; allowed values: {list(spec.allowed)}")
        return value
    if spec.kind is bool:
        if not isinstance(value, bool):
            raise InputError(f"{where}: values must be true or false, got {value!r}")
        return value
    if spec.kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError(f"{where}: values must be fractions between 0 and 1, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: values must be integers, got {value!r}")
    if spec.minimum is not None and value < spec.minimum:
        raise InputError(f"{where}: values must be at least {spec.minimum:g}, got {value!r}")
    return value


def _check_device(knob: Knob, source: str, device_type: str) -> None:
    if device_type == "cuda":
        return
    spec = KNOB[knob.name]
    values = knob.choices if knob.choices is not None else ()
    bad = [v for v in values if spec.cuda_only(v)]
    if bad:
        raise InputError(
            f"{source}: key '{knob.name}': {bad} only mean(s) something on CUDA, but the device is "
            f"{device_type}; use --space cpu, or drop these values"
        )
