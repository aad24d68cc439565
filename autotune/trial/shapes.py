"""The shapes of a batch's tensors, and whether they vary from batch to batch.

A batch can be any structure the user's loader yields: a tensor, tuples and lists of them, dicts
(a tokenizer's `BatchEncoding` is a mapping), dataclasses. Pure and cheap (a few microseconds a
batch): the trial reads every batch it pulls.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from autotune.contract.shapes import format_ranges, is_length, pad_multiple

__all__ = ["BULK_SHARE", "MAX_LEAVES", "PER_SAMPLE", "BatchSizes", "ShapeLog", "Signature",
           "bulk", "device_of", "leaves", "signature", "varying_dims"]

Signature = tuple[tuple[str, tuple[int, ...]], ...]
"""Each tensor's path in the batch ("", "[0]", "input_ids", "[1].mask") and its shape."""

MAX_LEAVES = 64
"""Tensors read per batch at most: a batch holding a list of per-sample tensors would otherwise
cost a walk per sample (the rest of the batch is left out of its signature)."""

PER_SAMPLE = 8
"""Items of a list or tuple from which, when they are alike (the same tensors under each, of the
same ranks), they count as one per sample (a detection batch's list of images, a list of target
dicts): shown as `[*]`, their ranges merged, instead of one range per item. As many as the
batch's samples count too. Fewer are fields ((inputs, targets), (ids, mask, labels)); fields
that differ never count: a recommender's (ids, offsets, dense, labels) was read per sample when
four items sufficed (held out, 2-CPU VM, 2026-11-26)."""

_INDEX = re.compile(r"\[(\d+)\]")

BULK_SHARE = 1 / 64
"""Elements, as a share of the batch's largest tensor's, from which a tensor is part of the
batch's bulk (`bulk`): the tensors whose shapes the model computes on. A held-out speech
model's concatenated CTC labels held 1/1280 of its padded features' elements and changed length
at 86-100% of the steps, its features' padded length at 52-100% (H200, 2026-11-28)."""

WHOLE_REPEATS = 0.5
"""Share of the steps run whose batch as a whole had a shape no step ran, below which a step's
first run is judged on the whole batch, whatever its bulk does (`ShapeLog.run_last`)."""


def signature(batch: Any) -> Signature:
    """The shape of every tensor (anything with an integer `.shape`) in `batch`, in order."""
    return tuple((path, shape) for path, shape, _ in leaves(batch))


def bulk(sig: Signature, most: Mapping[str, int] | None = None) -> Signature:
    """The tensors of `sig` holding at least `BULK_SHARE` of the elements of its largest; by
    `most`, the most elements each path has held, when given (a caption padded per batch is in
    a batch's bulk from its longest length on, at every length: not in and out by length)."""
    sizes = [math.prod(shape) if most is None else most[path] for path, shape in sig]
    least = BULK_SHARE * max(sizes, default=0)
    return tuple(item for item, size in zip(sig, sizes) if size >= least)


def device_of(batch: Any) -> str | None:
    """The device type of the first tensor in `batch` not in host memory ("cuda"), else None:
    a loader that hands over batches already on the device."""
    for _, _, leaf in leaves(batch):
        kind = getattr(getattr(leaf, "device", None), "type", "cpu")
        if kind != "cpu":
            return str(kind)
    return None


def leaves(batch: Any) -> list[tuple[str, tuple[int, ...], Any]]:
    """Each tensor in `batch` (MAX_LEAVES at most), in order: its path, its shape, itself."""
    out: list[tuple[str, tuple[int, ...], Any]] = []
    _walk(batch, "", out)
    return out


def _walk(obj: Any, path: str, out: list[tuple[str, tuple[int, ...], Any]]) -> None:
    if len(out) >= MAX_LEAVES or isinstance(obj, (str, bytes)):
        return
    shape = getattr(obj, "shape", None)
    if shape is not None and not isinstance(obj, type):
        try:
            out.append((path, tuple(int(d) for d in shape), obj))
        except (TypeError, ValueError):  # a .shape that is not sizes: not a tensor
            pass
        return
    named = isinstance(obj, tuple) and hasattr(obj, "_fields")  # a namedtuple: by its fields
    if isinstance(obj, Mapping) or named:
        for key, value in (zip(obj._fields, obj) if named else obj.items()):
            _walk(value, f"{path}.{key}" if path else str(key), out)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _walk(value, f"{path}[{i}]", out)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name), f"{path}.{f.name}" if path else f.name, out)


class BatchSizes:
    """Items and tensor elements per batch, summed over the batches pulled: their means say
    what a batch_size bought (`TrialResult.batch_items`, `batch_numel`)."""

    def __init__(self) -> None:
        self.batches = 0
        self.items = 0
        self.numel = 0

    def add(self, items: int, sig: Signature) -> None:
        self.batches += 1
        self.items += items
        self.numel += sum(math.prod(shape) for _, shape in sig)

    def mean_items(self) -> float | None:
        return self.items / self.batches if self.batches else None

    def mean_numel(self) -> float | None:
        """None before a batch, or when no batch held a tensor."""
        return self.numel / self.batches if self.batches and self.numel else None


class ShapeLog:
    """The signatures of the batches seen so far: whether they vary, how many distinct ones,
    and each varying dimension's smallest and largest size."""

    def __init__(self, batch_size: int | None = None) -> None:
        self.batch_size = batch_size
        """The trial's batch size: a list of that many alike items is held per sample."""
        self.first: Signature | None = None
        self.seen: set[Signature] = set()
        self._sizes: dict[tuple[str, int], tuple[int, int]] = {}
        self._ranks: dict[str, int] = {}
        self.amounts = BatchSizes()
        """Items and tensor elements per batch, over every batch added with its items."""
        self.last: Signature | None = None
        self._ran: set[Signature] = set()
        self._ran_bulk: set[Signature] = set()
        self._most: dict[str, int] = {}  # the most elements each path's tensor held in a step
        self._runs = 0  # steps run (those whose whole batch was new: `len(self._ran)`)
        self.device: str | None = None
        """Where the first batch's tensors were (`device_of`): None, host memory."""

    def add(self, sig: Signature, *, items: int | None = None, batch: Any = None) -> None:
        """A batch's signature (and its item count, `Adapter.items`, when known; the first
        `batch` itself, to see where its tensors are)."""
        if items is not None:
            self.amounts.add(items, sig)
        self.last = sig
        if self.first is None:
            self.first = sig
            self.device = device_of(batch)
        if sig in self.seen:
            return
        self.seen.add(sig)
        for path, shape in sig:
            self._ranks[path] = len(shape)
            for dim, size in enumerate(shape):
                low, high = self._sizes.get((path, dim), (size, size))
                self._sizes[(path, dim)] = (min(low, size), max(high, size))

    def run_last(self) -> bool:
        """Note that a step runs the batch added last; whether no step ran its shapes before
        (a batch pulled and dropped unrun, `TrainStep.skip_queued`, does not count).

        Judged on the batch's `bulk` alone once, over the steps before, the bulk's shapes have
        varied and the whole batch's were new at `WHOLE_REPEATS` of the steps or more; else on
        the whole batch. A small tensor new at nearly every step (a speech batch's concatenated
        labels, a detection batch's boxes) then no longer makes every step a first run: the
        padded features' new lengths, which cost (a bf16 step 200 ms against 45 ms), show.
        While the bulk keeps one shape, a small tensor's new lengths are the first runs (a
        caption padded per batch beside images of one size; Whisper's decoder labels beside
        its fixed features): a review found them missed when the bulk decided from the first
        step (2026-11-29)."""
        if self.last is None:
            return False
        whole = self.last not in self._ran
        for path, shape in self.last:
            self._most[path] = max(self._most.get(path, 0), math.prod(shape))
        key = bulk(self.last, self._most)
        new = key not in self._ran_bulk
        by_bulk = (len(self._ran_bulk) > 1  # judged on the steps before
                   and len(self._ran) >= WHOLE_REPEATS * self._runs)
        self._ran.add(self.last)
        self._ran_bulk.add(key)
        self._runs += 1
        return new if by_bulk else whole

    @property
    def vary(self) -> bool:
        """Whether two batches seen had different shapes (or structures)."""
        return len(self.seen) > 1

    @property
    def count(self) -> int:
        """Distinct shapes seen: under `reduce-overhead`, one CUDA graph each."""
        return len(self.seen)

    def _merged(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Each varying dimension, the items of a list held per sample as one (`[*]`), with the
        smallest and largest size of any."""
        general = _per_sample(self._ranks, self.batch_size)
        merged: dict[tuple[str, int], tuple[int, int]] = {}
        for (path, dim), (low, high) in self._sizes.items():
            key = (general[path], dim)
            was = merged.get(key, (low, high))
            merged[key] = (min(was[0], low), max(was[1], high))
        return {key: span for key, span in merged.items() if span[0] != span[1]}

    def ranges(self) -> str:
        """The varying dimensions and their ranges ("" when none varies)."""
        return format_ranges((f"{path or 'batch'}[{dim}]", low, high)
                             for (path, dim), (low, high) in self._merged().items())

    def padded_count(self) -> int | None:
        """Distinct shapes left of those seen once every varying length (`contract.shapes.
        is_length`, the note's rule) is padded up to its `pad_multiple`: exact for these batches, where
        padding each length alone only bounds it (a tokenizer's input_ids and attention_mask
        move together; a seq2seq batch's source and target lengths apart). None when no length
        varies."""
        general = _per_sample(self._ranks, self.batch_size)
        lengths = {key: pad_multiple(low, high) for key, (low, high) in self._merged().items()
                   if is_length(f"{key[0] or 'batch'}[{key[1]}]", high, self.batch_size)}
        if not lengths:
            return None

        def padded(path: str, dim: int, size: int) -> int:
            multiple = lengths.get((general.get(path, path), dim))
            return size if multiple is None else -(-size // multiple) * multiple

        return len({tuple((path, tuple(padded(path, dim, size) for dim, size in enumerate(shape)))
                          for path, shape in sig) for sig in self.seen})

    def facts(self) -> ShapeFacts:
        """What the trial reports of its batches' shapes."""
        return ShapeFacts(vary=self.vary, ranges=self.ranges() or None, count=self.count,
                          padded=self.padded_count() if self.vary else None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShapeFacts:
    """Whether a trial's batches changed shape, and how (`TrialResult.shapes_vary`, ...)."""

    vary: bool
    """Whether two batches seen had different shapes (or structures)."""
    ranges: str | None
    """The varying dimensions and their ranges (None when none varies)."""
    count: int
    """Distinct shapes seen: under `reduce-overhead`, one CUDA graph each."""
    padded: int | None = None
    """Distinct shapes left once every varying length is padded to its `pad_multiple`
    (`ShapeLog.padded_count`); None when no length varies."""


def _alike(items: Mapping[str, set[tuple[str, int]]]) -> bool:
    """Whether a list's items hold the same tensors; its last item may hold part of them (the
    signature stops at MAX_LEAVES tensors, within an item)."""
    order = sorted(items, key=int)
    common = {frozenset(items[i]) for i in order[:-1]}
    return len(common) == 1 and frozenset(items[order[-1]]) <= next(iter(common))


def _per_sample(ranks: Mapping[str, int], batch_size: int | None) -> dict[str, str]:
    """Each path (with its tensor's rank) with the indices of lists held per sample as `[*]`:
    PER_SAMPLE or more items, or as many as the batch's samples, all alike."""
    under: dict[str, dict[str, set[tuple[str, int]]]] = defaultdict(lambda: defaultdict(set))
    for path, rank in ranks.items():
        for m in _INDEX.finditer(path):  # its list's path -> the index -> what lies under it
            under[path[:m.start()]][m[1]].add((_INDEX.sub("[*]", path[m.end():]), rank))
    held = {container for container, items in under.items()
            if (len(items) >= PER_SAMPLE or 2 < len(items) == (batch_size or 0))
            and _alike(items)}
    out = {}
    for path in ranks:
        general = path  # right to left: the spans of the indices left of one stay as found
        for m in reversed(list(_INDEX.finditer(path))):
            if path[:m.start()] in held:
                general = general[:m.start()] + "[*]" + general[m.end():]
        out[path] = general
    return out


def varying_dims(signatures: list[Signature]) -> frozenset[tuple[str, int]]:
    """Each (path, dimension) whose size differs among `signatures`, for the tensors every one
    of them holds at that path with the same rank."""
    if not signatures:
        return frozenset()
    shapes: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    for sig in signatures:
        for path, shape in sig:
            shapes[path].add(shape)
    held = set.intersection(*({path for path, _ in sig} for sig in signatures))
    return frozenset((path, dim) for path in held if len({len(s) for s in shapes[path]}) == 1
                     for dim in range(len(next(iter(shapes[path]))))
                     if len({s[dim] for s in shapes[path]}) > 1)
