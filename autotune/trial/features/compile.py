"""`torch.compile` of the model, in one of its modes, and what Dynamo says it compiled."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

from autotune.contract.events import RecompileEvent
from autotune.contract.recompiles import SEPARATOR, short_reason
from autotune.trial.shapes import Signature, leaves, varying_dims

__all__ = ["MARK_DISTINCT", "CompileWatch", "Recompiles", "apply_compile", "compile_loss",
           "compile_seconds", "compiled_dynamic", "dims_to_mark", "mark_varying", "specialized"]

Loss = TypeVar("Loss", bound=Callable[..., Any])

# Dynamo's own timings of a compile (`torch._dynamo.utils.compilation_time_metrics`, torch
# 2.11-2.13): tracing and the forward graph's compile, then the backward's, compiled lazily at
# the first backward outside Dynamo's frame compile.
_COMPILE_TIMERS = ("_compile.compile_inner", "compile_fx.<locals>.bw_compiler")


def apply_compile(model: torch.nn.Module, mode: str, *,
                  dynamic: bool | None = None) -> torch.nn.Module:
    """Return the module to call: `model` itself for "none", else a compiled wrapper.

    Compilation is lazy: it happens on the first forward, which is why the measurement warms up
    until step times settle and reports that time apart from step time. `dynamic`: as
    `torch.compile`'s (None, its default: static first, dynamic after a recompile).
    """
    if mode == "none":
        return model
    # torch.compile is typed to return a callable; given a Module it returns an OptimizedModule.
    return torch.compile(model, mode=mode, dynamic=dynamic)  # type: ignore[return-value]


def compile_loss(loss: Loss, mode: str, scope: str, *,
                 dynamic: bool | None = None) -> Loss | None:
    """`loss` (the adapter's `loss(model, batch)`) compiled whole when `scope` is "loss": Dynamo
    traces the model it is handed into the same graph, so a loss computed outside the model
    fuses with the model's last ops. Otherwise (`scope` "model", or `mode` "none") None: the
    loss runs as written, the model is what `apply_compile` compiled."""
    if mode == "none" or scope != "loss":
        return None
    return cast(Loss, torch.compile(loss, mode=mode, dynamic=dynamic))


def compiled_dynamic(forward: torch.nn.Module, mode: str) -> torch.nn.Module:
    """`forward` (what `apply_compile` returned, never called yet) compiled again with dynamic
    shapes from the start. `dynamic=True` for every dimension (the user's loss may slice or
    reshape the batch before the model sees it); `mark_varying` adds marks on the batch's
    varying dimensions where the batches show many sizes."""
    original = getattr(forward, "_orig_mod", None)
    if mode == "none" or original is None:
        return forward
    return apply_compile(original, mode, dynamic=True)


MARK_DISTINCT = 6
"""Distinct shapes among the peeked batches (`compose.PEEK_BATCHES`, 8) that mean many sizes,
not buckets: a BERT's 44 padded lengths show 6 in 96% of draws, 5 buckets never."""


def dims_to_mark(seen: list[Signature]) -> frozenset[tuple[str, int]]:
    """The varying dimensions of the batches `seen` (`shapes.varying_dims`) to mark dynamic:
    all of them when MARK_DISTINCT of the shapes differ, else none (a few buckets)."""
    return varying_dims(seen) if len(set(seen)) >= MARK_DISTINCT else frozenset()


def mark_varying(batch: Any, dims: frozenset[tuple[str, int]]) -> Any:
    """Mark each of `dims` ((path, dimension), `shapes.varying_dims`) of the tensors of
    `batch` dynamic (`torch._dynamo.mark_dynamic`), where its size is 2 or more. A compile that
    specializes such a dimension then ends with its first compile, in Dynamo's
    ConstraintViolationError (raised as it builds the guards, after the backend compiled),
    naming the dimension and the user's line where the trace has one (`specialized`), instead
    of compiling again at every new size: a BERT-base on padded batches, compiled with
    `dynamic=True`, compiled 83, 72, 40, 41, 39 s at its first five padded lengths on an H100
    (2026-11-27) and was killed at its trial limit. Only for batches of many sizes (`compose`):
    with a few (bucketed padding), a recompile per size pays, and a mark would make it an
    error. A tensor the loss derives from the batch is not marked. Returns `batch`."""
    if not dims:
        return batch
    for path, shape, tensor in leaves(batch):
        for dim, size in enumerate(shape):
            if (path, dim) in dims and size >= 2 and isinstance(tensor, torch.Tensor):
                torch._dynamo.mark_dynamic(tensor, dim)
    return batch


def specialized(exc: BaseException) -> str | None:
    """When `exc` (or what caused it) is Dynamo's ConstraintViolationError for a dimension
    `mark_varying` marked: what it says in one line, with the last line of the user's code it
    names; else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if type(cause).__name__ == "ConstraintViolationError":
            lines = [line.strip() for line in str(cause).splitlines()]
            said = next((line.lstrip("- ").split(". If you")[0] for line in lines
                         if "specialized it" in line or "specialized" in line and "marked" in line),
                         lines[0] if lines else "constraints violated")
            where = [line for line in lines if line.startswith("File ")]
            return said + (f" ({where[-1]})" if where else "")
        cause = cause.__cause__ or cause.__context__
    return None


def _graphs() -> int | None:
    """Graphs Dynamo has compiled in this process (`counters["stats"]["unique_graphs"]`, in
    torch since 2.0), None when unreadable."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):
        return None


def compile_seconds() -> float | None:
    """Seconds Dynamo and Inductor have spent compiling in this process, by their own timers."""
    try:
        from torch._dynamo.utils import compilation_time_metrics

        if not any(k in compilation_time_metrics for k in _COMPILE_TIMERS):
            return None  # nothing compiled yet, or timers named otherwise in this torch
        return float(sum(sum(compilation_time_metrics.get(k, ())) for k in _COMPILE_TIMERS))
    except (ImportError, AttributeError, TypeError, ValueError):
        return None


class CompileWatch:
    """What was compiled after the first step (its graphs, its seconds, why): recompiles,
    counted from Dynamo's counters, with the guards that failed from its compilation metrics.
    Read before the first step, at its end, and at the trial's end."""

    def __init__(self) -> None:
        self._start = (_graphs(), compile_seconds())
        self._first: tuple[int | None, float | None] | None = None
        self._before_first: list[Any] = []  # the metrics of the first step, held (by identity)

    def first_step_done(self) -> None:
        self._first = (_graphs(), compile_seconds())
        self._before_first = _compilation_metrics()

    def first_graphs(self) -> int | None:
        """Graphs the first step compiled (0: Dynamo compiled nothing); None when unknown."""
        before, after = self._start[0], self._first[0] if self._first else None
        return None if before is None or after is None else max(0, after - before)

    def recompiles(self) -> int | None:
        """Graphs compiled since the first step (new shapes or paths): None when unknown."""
        now = _graphs()
        before = self._first[0] if self._first else None
        return None if now is None or before is None else max(0, now - before)

    def recompile_seconds(self) -> float | None:
        """Seconds compiling since the first step, by Dynamo's and Inductor's timers."""
        now = compile_seconds()
        before = self._first[1] if self._first else None
        return None if now is None or before is None else max(0.0, now - before)

    def reasons(self) -> tuple[str, ...]:
        """The guards whose failure compiled again since the first step (`short_reason`),
        each once, in the order they last failed (the last is the latest)."""
        if self._first is None:
            return ()
        held = {id(m) for m in self._before_first}
        out: list[str] = []
        for m in _compilation_metrics():
            said = short_reason(getattr(m, "recompile_reason", None) or "")
            if id(m) not in held and said:
                out = [r for r in out if r != said] + [said]
        return tuple(out)

    def read(self) -> Recompiles:
        """What was compiled since the first step, read now."""
        return Recompiles(count=self.recompiles(), seconds=self.recompile_seconds(),
                          reasons=self.reasons(), first_graphs=self.first_graphs())

    def event(self) -> RecompileEvent:
        """What was compiled since the first step, for the parent."""
        now = self.read()
        return RecompileEvent(count=now.count, seconds=now.seconds,
                              reasons=SEPARATOR.join(now.reasons))


def _compilation_metrics() -> list[Any]:
    """Dynamo's record of each frame compile in this process (`get_compilation_metrics`, torch
    2.2 on; each with its `recompile_reason`); [] where this torch has none."""
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except (ImportError, AttributeError, TypeError):
        return []


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recompiles:
    """What Dynamo compiled after a trial's first step (new shapes, new paths)."""

    count: int | None
    """Graphs compiled (None: Dynamo's counters could not be read)."""
    seconds: float | None
    """Seconds compiling (None: its timers are named otherwise in this torch)."""
    reasons: tuple[str, ...] = ()
    """The guards that failed (`contract.recompiles.short_reason`), each once, in order."""
    first_graphs: int | None = None
    """Graphs the first step compiled (None: unknown)."""
