"""CUDA graphs for an eager best whose `default` compile bought nothing.

Inductor's fused kernels shrink the GPU's work; a compiled step that did not speed up waits on
its host's launches, which CUDA graphs (`reduce-overhead`) remove. A held-out DeepLabV3 (H200,
2026-11-29), eager bf16 with the GPU 90% busy: 212 images/s eager, 210 compiled with `default`,
381 under CUDA graphs. The compiled trial did not lead, so it was not diagnosed, and the eager
leader's diagnosis (compute-bound, busy) pointed nowhere: CUDA graphs were never tried.

Read from the study's records after every trial, not from the trial that just ended, and queued
first (urgent): a tie won by noise (expandable segments, say) makes a new best whose own checks
would not compile it again (`cannot_win`: `default` gained nothing), and a resumed study has no
ladder of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.result import Verdict
from autotune.study.policy.eager import _measured, compile_gains
from autotune.study.policy.graphs import many_shapes
from autotune.study.policy.starts import FOLLOW, Start
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import TrialRecord

__all__ = ["BUSY_CEILING", "NO_GAIN", "graphs_after_default"]

NO_GAIN = 1.05
"""A `default` compile whose best gain over its eager twin stayed under this bought nothing."""

BUSY_CEILING = 0.95
"""An eager leader whose GPU was busier than this leaves CUDA graphs nothing to take: its
host's launches hide under the kernels (DeepLabV3 above: 0.90)."""


def graphs_after_default(space: SearchSpace, finished: Sequence[TrialRecord], *,
                         device: str) -> list[Start]:
    """The fastest measured config, eager, under CUDA graphs, when every `default` compile of
    the study gained under NO_GAIN over its eager twin, the leader was diagnosed compute- or
    overhead-bound with its GPU busy under BUSY_CEILING (or not measured), its shapes few, and
    that config has not run; else nothing."""
    best = max(_measured(finished), key=lambda r: r.rate, default=None)
    gain = compile_gains(finished).get("default")
    if device != "cuda" or best is None or best.config.compile != "none" or gain is None \
            or gain >= NO_GAIN or "reduce-overhead" not in space.values("compile") \
            or many_shapes(best.result):
        return []
    diagnosis = best.result.diagnosis
    if diagnosis is None or diagnosis.verdict not in (Verdict.COMPUTE, Verdict.OVERHEAD) \
            or (diagnosis.gpu_busy_fraction or 0.0) >= BUSY_CEILING:
        return []
    graphs = best.config.replace(compile="reduce-overhead")
    if not space.holds(graphs) or any(r.config == graphs for r in finished):
        return []
    return [(f"{FOLLOW}{graphs.describe()}", graphs)]
