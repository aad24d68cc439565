"""Shapes that vary from batch to batch, in words: the range a trial saw and what padding to a
multiple would leave. Text batches padded per batch have a new length almost every batch, and
every distinct shape is a cost to a compiled step: a recompile with static shapes, one CUDA
graph per shape under `reduce-overhead`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["PAD_MULTIPLE", "format_ranges", "is_length", "pad_multiple", "padded_shapes",
           "padding_note", "parse_ranges", "shapes_block"]

PAD_MULTIPLE = 64
"""The largest multiple `best.yaml` suggests padding a varying length to: the sizes matmul tiles
and tensor cores prefer (Hugging Face tokenizers' `pad_to_multiple_of` takes such a number)."""

PAD_SHARE = 0.1
"""The most padding may add to a length on average: half the multiple, against the middle of
the length's range (`pad_multiple`)."""


def pad_multiple(low: int, high: int) -> int:
    """The multiple to pad a length of `low`..`high` to: the largest of 64, 32, 16 and 8 whose
    average padding (half of it) is at most PAD_SHARE of the range's middle, never below 8 (a
    tensor core's alignment). 512-1024 tokens: 64; 9-47 tokens: 8, where padding to 64 would
    double the work."""
    middle = (low + high) / 2
    return next((m for m in (PAD_MULTIPLE, 32, 16) if m / 2 <= PAD_SHARE * middle), 8)

_RANGE = re.compile(r"(\S+) (\d+)-(\d+)")


def format_ranges(ranges: Iterable[tuple[str, int, int]]) -> str:
    """"input_ids[1] 512-1024, labels[1] 512-1024": each varying dimension (its path in the
    batch, then the dimension), the smallest and largest size seen."""
    return ", ".join(f"{where} {low}-{high}" for where, low, high in ranges)


def parse_ranges(text: str) -> list[tuple[str, int, int]]:
    """The ranges `format_ranges` wrote."""
    return [(m[1], int(m[2]), int(m[3])) for m in _RANGE.finditer(text)]


def padded_shapes(low: int, high: int, multiple: int = PAD_MULTIPLE) -> int:
    """How many sizes are left of `low`..`high` once each is padded up to a multiple."""
    if not 0 <= low <= high or multiple < 1:
        raise ValueError(f"need 0 <= low <= high and multiple >= 1, got {low=} {high=} {multiple=}")
    return math.ceil(high / multiple) - math.ceil(low / multiple) + 1


def is_length(where: str, high: int, batch_size: int | None) -> bool:
    """Whether a varying dimension ("input_ids[1]", `format_ranges`' name) is a length padding
    can fix. A tensor's first dimension is the batch's samples: padding is advice for a length,
    not for it (a sampler batching by length varies how many samples a batch holds). Not so in
    a tensor of one sample, an item of a list held per sample (`[*]`): a detection target's
    boxes; nor where it grew past the batch size: a recommender's flat ids of every sample."""
    return (not where.endswith("[0]") or "[*]" in where
            or (batch_size is not None and high > batch_size))


def _lengths(ranges: list[tuple[str, int, int]], batch_size: int | None
             ) -> list[tuple[str, int, int]]:
    """The ranges of dimensions padding can fix (`is_length`)."""
    return [r for r in ranges if is_length(r[0], r[2], batch_size)]


def _padded_to(lengths: list[tuple[str, int, int]]) -> str:
    """"input_ids[1] and attention_mask[1] to a multiple of 64": each length with its own
    `pad_multiple`, those of one multiple together."""
    groups: dict[int, list[str]] = {}
    for where, low, high in lengths:
        groups.setdefault(pad_multiple(low, high), []).append(where)
    parts = [f"{_joined(names)} to a multiple of {m}" for m, names in groups.items()]
    return _joined(parts)


def _advised(multiples: set[int]) -> str:
    return f" ({next(iter(multiples))} is one)" if len(multiples) == 1 else " (those above are)"


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def padding_note(shape_range: str, shape_count: int | None, *, batch_size: int | None = None,
                 padded: int | None = None, cuda: bool = True,
                 compiled: bool | None = None) -> str:
    """One sentence for best.yaml: the shapes vary, over what, and what padding would allow
    (`batch_size`: the trial's, when known; a first dimension that grew past it is a length.
    `padded`: the distinct shapes the trial's batches leave with every length padded to its
    `pad_multiple`, `TrialResult.shape_count_padded`; else, for a result recorded before that
    count, what padding leaves of each length alone. `cuda`: measured on a GPU, where
    reduce-overhead's CUDA graphs pay per shape too. `compiled` False: the config runs eager,
    which pays nothing per shape)."""
    static = ("a compile with static shapes or reduce-overhead's one CUDA graph per shape"
              if cuda else "a compile with static shapes")
    ranges = parse_ranges(shape_range)
    seen = f", {shape_count} distinct shapes" if shape_count else ""
    if not ranges:
        return f"Batch shapes vary from batch to batch{seen}."
    lengths = _lengths(ranges, batch_size)
    samples = ("" if len(lengths) == len(ranges) else
               " The number of samples a batch varies too (a sampler batching by length, a last "
               "partial batch): each batch size is a shape of its own as well" +
               (", counted among those." if padded is not None else "."))
    if not lengths:
        return (f"Batch shapes vary from batch to batch ({shape_range}{seen}): the number of "
                "samples a batch varies (a sampler batching by length, a last partial batch), so "
                f"{static} pays for each batch size; batches of a fixed size (drop_last) keep "
                "one.")
    if padded is not None:
        shapes = f"{padded} {'shape' if padded == 1 else 'shapes'}"
        leave = f"{padded} of the {shape_count} shapes seen" if shape_count else shapes
        pay = f"{padded}"
    else:  # recorded before that count: lengths that move together or apart are not told
        left = max(padded_shapes(low, high, pad_multiple(low, high)) for _, low, high in lengths)
        leave = f"at most {left} {'size' if left == 1 else 'sizes'}" + (
            " of each" if len(lengths) > 1 else "")
        pay = f"{left}" if len(lengths) == 1 else f"at most {left} sizes of each"
    eager = (" The config runs eager, which pays nothing per shape: this is for a compiled step."
             if compiled is False else "")
    return (f"Batch shapes vary from batch to batch ({shape_range}{seen}): padding "
            f"{_padded_to(lengths)} would leave {leave}, so {static} would pay for {pay}, not "
            f"one per length.{samples}{eager}")


def shapes_block(*, vary: bool | None, shape_range: str | None, count: int | None,
                 dynamic: bool | None, batch_size: int | None = None,
                 padded: int | None = None, recompile_multiple: int | None = None,
                 cuda: bool = True, compiled: bool | None = None) -> dict[str, Any] | None:
    """best.yaml's `shapes:`: whether the batches' shapes vary, over what, how many were seen,
    whether the compile was dynamic, and what padding would allow (`recompile_multiple`: the
    multiple `recompiles.divisor` reads from `TrialResult.recompile_reason`). None when not
    measured."""
    if vary is None:
        return None
    if not vary:
        return {"vary": False}
    note = padding_note(shape_range or "", count, batch_size=batch_size, padded=padded,
                        cuda=cuda, compiled=compiled)
    if recompile_multiple:
        m = recompile_multiple
        advised = {pad_multiple(low, high)
                   for _, low, high in _lengths(parse_ranges(shape_range or ""), batch_size)}
        kept = advised and all(a % m == 0 for a in advised)
        note += (" Its compile recompiled on guards testing the lengths' divisibility (a "
                 f"kernel's alignment): lengths padded to a multiple of {m}"
                 + (_advised(advised) if kept else "") + " keep those guards true"
                 + (f": pad to a multiple of {math.lcm(m, *advised)} rather than the one above."
                    if advised and not kept else "."))
    return {"vary": True, "range": shape_range, "distinct": count, "dynamic_compile": dynamic,
            "note": note}
