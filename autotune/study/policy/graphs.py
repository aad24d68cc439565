"""CUDA graphs on batches of many shapes: a cost counted before a trial, not a timeout found.

`reduce-overhead` (and `max-autotune`) replays CUDA graphs, and a graph holds one set of
tensor shapes: PyTorch records a new graph for every distinct input size. Where the batches are
padded per batch, each batch brings a shape not seen yet for as long as training runs. A
held-out transformers T5-small (sources of 64-512 tokens and targets of 8-128 padded per batch,
48 distinct shapes in one eager trial of about 100 steps; H100, torch 2.11, 2026-11-27) was
overhead-bound eagerly, so the ladder climbed to CUDA graphs: the first step compiled for 211 s
and the trial was killed at its 274-s limit still warming up, half of a 548-s search spent.

So once a trial saw more than CUDA_GRAPH_SHAPES distinct shapes under an adapter's knob
values and batch size, no CUDA-graph config with those values is run on CUDA: the ladder
climbs to a dynamic-shape compile (`compile=default`) instead, and a proposal is refused unrun
as infeasible (the sampler learns it). The padding note of `best.yaml` says what padding
would leave; an adapter knob that pads (`pad_to_multiple_of`) keeps its own trials apart, as
its values change the shapes (`one_shape`).

Where shapes are few, an eager best is checked under CUDA graphs when its GPU idles for a
sizable share of its step (`graphs_check`), or when a `default` compile bought nothing
(`host_bound`).
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.config import TrainConfig
from autotune.contract.request import CUDAGRAPH_MODES
from autotune.contract.result import TrialResult, Verdict
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured

__all__ = ["CUDA_GRAPH_SHAPES", "GRAPHS_BUSY", "graphs_check", "graphs_refused", "many_shapes"]

CUDA_GRAPH_SHAPES = 16
"""Distinct batch shapes one trial may see for CUDA graphs to be tried: a bucketing sampler's
lengths (multiples of 64 up to 1024 are 16), not a shape per batch (T5 above: 48 in one trial;
BERT padded per batch: about 80)."""


def many_shapes(result: TrialResult | None) -> bool:
    """Whether `result`'s batches came in more than CUDA_GRAPH_SHAPES distinct shapes."""
    return result is not None and bool(result.shapes_vary) \
        and (result.shape_count or 0) > CUDA_GRAPH_SHAPES


def graphs_refused(config: TrainConfig, finished: Sequence[TrialRecord], device: str
                   ) -> str | None:
    """Why `config` is not run, when it replays CUDA graphs (on CUDA) and a trial with its
    adapter knob values and batch size saw too many shapes for one graph each (as the ladder
    reads its best: a larger padded batch sees fewer); None otherwise."""
    if device != "cuda" or config.compile not in CUDAGRAPH_MODES:
        return None
    by = _many(config, measured(finished))
    if by is None:
        return None
    return (f"not run: compile={config.compile} records a CUDA graph for every batch shape, and "
            f"trial {by.number} saw {by.result.shape_count} distinct shapes "
            f"({by.result.shape_range or 'varying'}): a new graph for each new shape, its rate "
            f"would not settle; pad the varying lengths to a few sizes (an adapter knob) to "
            f"search CUDA graphs")


def _many(config: TrainConfig, ran: Sequence[MeasuredRecord]) -> MeasuredRecord | None:
    return next((r for r in ran if r.config.params == config.params
                 and r.config.batch_size == config.batch_size and many_shapes(r.result)), None)


GRAPHS_BUSY = 0.85
"""An eager GPU step diagnosed compute-bound whose kernels ran less than this share of its time
with data resident is checked under CUDA graphs as well as compiled: a held-out MobileNetV3
(H200, 2026-11-28) read 64% busy, just above the overhead verdict's bar, its `default` compile
ran 0.80x the eager step, and reduce-overhead, never tried, had run 1.27x it on another host."""


def graphs_check(space: SearchSpace, best: TrialRecord, device: str) -> TrainConfig | None:
    """The eager best under CUDA graphs (`reduce-overhead`) when it is compute-bound with the GPU
    idle for a sizable share of its step (`GRAPHS_BUSY`) and its shapes few; else None. (After
    a `default` compile that bought nothing: `host_bound`.)"""
    assert best.config is not None
    result = best.result
    busy = result.diagnosis.gpu_busy_fraction if result and result.diagnosis else None
    if device != "cuda" or best.verdict is not Verdict.COMPUTE or busy is None \
            or busy >= GRAPHS_BUSY or "reduce-overhead" not in space.values("compile") \
            or many_shapes(result):
        return None
    return best.config.replace(compile="reduce-overhead")
