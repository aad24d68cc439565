"""The sampler that proposes the search's configurations: multivariate TPE, or random search;
and the same sampler holding knobs that measurements say cannot pay (`held`): `compile` at
"none" while the model outpaces its loader, or once a compile kept recompiling on an adapter
without knobs of its own; the convolution knobs at PyTorch's defaults for a model without
convolutions; batch_size at the adapter's once its loader is seen to make its own batches;
optimizer_impl at "default" for an optimizer without the flags; activation checkpointing off
while every batch tried fit in memory."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna

from autotune.contract.result import Status
from autotune.study.policy.batching import ON_DEVICE, batch_held, loader_on_device
from autotune.study.policy.eager import _measured, kept_recompiling
from autotune.study.policy.headroom import model_outpaces
from autotune.study.policy.no_graph import nothing_held
from autotune.study.policy.optimizer import impl_held
from autotune.study.store.records import TrialRecord

__all__ = ["NO_CONVOLUTION", "compile_settles_nowhere", "held", "holding",
           "model_outpaces_loader", "sampler"]


def sampler(kind: str, *, seed: int | None) -> optuna.samplers.BaseSampler:
    """TPE (multivariate, grouped, constant liar), or random search with `--sampler random`
    (`kind`, `SearchSettings.sampler`)."""
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        # multivariate/group/constant_liar are "experimental" in Optuna: chosen knowingly.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            multivariate=True,
            group=True,  # conditional knobs (prefetch only with workers) form groups
            constant_liar=True,  # processes sharing a study do not propose the same config
            n_startup_trials=5,
        )


NO_CONVOLUTION = {"memory_format": "contiguous", "cudnn_benchmark": False}
"""The convolution knobs (`scan.KERNEL_KNOBS`) at PyTorch's defaults: for a model without
convolutions the others change nothing, and a held-out MLP's best.yaml carried channels_last,
a no-op TPE had proposed (2-CPU VM, 2026-11-26)."""


def held(records: Sequence[TrialRecord], values: Callable[[str], Sequence[Any]], *,
         no_compile_fits: bool = False) -> dict[str, Any]:
    """The knobs the sampler holds now, with their values: only knobs the space varies
    (`values`, `SearchSpace.values`), at a value it holds. `no_compile_fits`: this search found
    a compile too slow for the time it had left, which only shrinks; while the best runs eager,
    nothing compiled is proposed (TPE, told nothing by such a config, proposed two more on a
    held-out nn.TransformerEncoder, 2-CPU VM, 2026-11-27)."""
    hold: dict[str, Any] = {}
    if model_outpaces_loader(records) or compile_settles_nowhere(records) \
            or (no_compile_fits and _eager_leads(records)):
        hold["compile"] = "none"
    if no_convolution(records):
        hold.update(NO_CONVOLUTION)
    if no_memory_wall(records):
        hold["checkpoint"] = 0.0
    batch = batch_held(records)
    if batch is not None:  # the loader makes its own batches: every batch_size measures it
        hold["batch_size"] = batch
    if loader_on_device(records):
        hold.update(ON_DEVICE)
    hold.update(impl_held(records, values))
    hold.update(nothing_held(records))
    return {k: v for k, v in hold.items() if len(values(k)) > 1 and v in values(k)}


def _eager_leads(records: Sequence[TrialRecord]) -> bool:
    """Whether the fastest trial so far (as `model_outpaces_loader` reads it) runs eager."""
    best = max(_measured(records), key=lambda r: r.rate, default=None)
    return best is not None and best.config.compile == "none"


def holding(base: optuna.samplers.BaseSampler, hold: Mapping[str, Any]
            ) -> optuna.samplers.BaseSampler:
    """`base` proposing `hold`'s values for its knobs (Optuna's `PartialFixedSampler`): the
    knobs it still chooses are learned as before, from every trial."""
    if not hold:
        return base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.PartialFixedSampler(dict(hold), base)


def no_convolution(records: Sequence[TrialRecord]) -> bool:
    """Whether every trial that counted the model's convolution weights found none (an adapter
    knob choosing a model variant may add some)."""
    counts = [r.result.conv_weights for r in records
              if r.result is not None and r.result.conv_weights is not None]
    return bool(counts) and not any(counts)


def no_memory_wall(records: Sequence[TrialRecord]) -> bool:
    """Whether trials were measured and none ran out of memory, measured or implied. Activation
    checkpointing recomputes the forward to make room for a batch that does not fit otherwise;
    while every batch tried fit, it only slows the step. A held-out DeepLabV3 at its fixed
    batch of 8 (3 GB of an H200's 141; 2026-11-29) had 5 of TPE's 14 proposals checkpointed;
    the bf16 one that ran read 0.77x the bf16 leader."""
    return bool(_measured(records)) and not any(r.status is Status.OOM for r in records)


def model_outpaces_loader(records: Sequence[TrialRecord]) -> bool:
    """Whether the fastest trial so far waited for its loader and ran at its rate while its model
    alone ran at least MODEL_HEADROOM x that rate (`headroom.model_outpaces`): compiling a
    proposal's model then buys nothing, and its
    loader knobs are measured as well eager. A held-out input-bound loader on an H100 (2026-11-26)
    spent 68 of its search's 262 s on five compiled proposals, none above the eager leader."""
    best = max(_measured(records), key=lambda r: r.rate, default=None)
    return best is not None and model_outpaces(best)


def compile_settles_nowhere(records: Sequence[TrialRecord]) -> bool:
    """Whether a compile kept recompiling (`eager.kept_recompiling`) on an adapter without knobs of
    its own: every compiled proposal would then be refused unrun. With adapter knobs (a padding
    knob may fix the shapes) only those with the same values are, and the sampler is left as is."""
    return any(kept_recompiling(r) and r.config is not None and not r.config.params
               for r in records)
