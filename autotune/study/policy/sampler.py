"""The sampler that proposes the search's configurations: multivariate TPE, or random search;
and the same sampler with `compile` held at "none" while the model outpaces its loader, or once
a compile kept recompiling on an adapter without knobs of its own."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import optuna

from autotune.contract.result import Verdict
from autotune.study.policy.eager import _measured, recompiling
from autotune.study.store.records import TrialRecord

__all__ = ["MODEL_HEADROOM", "compile_settles_nowhere", "eager_only", "model_outpaces_loader",
           "sampler"]

MODEL_HEADROOM = 1.25
"""How much faster than its loader the best trial's model must run alone (data resident) for a
compile of the model to move nothing: the step then waits for the loader whatever the model
does."""


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


def eager_only(base: optuna.samplers.BaseSampler) -> optuna.samplers.BaseSampler:
    """`base` proposing only eager configs (Optuna's `PartialFixedSampler`, `compile` fixed at
    "none"): the knobs it still chooses are learned as before, from every trial."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.PartialFixedSampler({"compile": "none"}, base)


def model_outpaces_loader(records: Sequence[TrialRecord]) -> bool:
    """Whether the fastest trial so far waited for its loader while its model alone ran at least
    MODEL_HEADROOM x the loader's rate: compiling a proposal's model then buys nothing, and its
    loader knobs are measured as well eager. A held-out input-bound loader on an H100 (2026-11-26)
    spent 68 of its search's 262 s on five compiled proposals, none above the eager leader."""
    best = max(_measured(records), key=lambda r: r.rate, default=None)
    diagnosis = best.result.diagnosis if best is not None else None
    if diagnosis is None or diagnosis.verdict is not Verdict.INPUT:
        return False
    loader, model = diagnosis.loader_rate, diagnosis.compute_rate
    return bool(loader and model and model >= MODEL_HEADROOM * loader)


def compile_settles_nowhere(records: Sequence[TrialRecord]) -> bool:
    """Whether a compile kept recompiling (`eager.recompiling`) on an adapter without knobs of
    its own: every compiled proposal would then be refused unrun. With adapter knobs (a padding
    knob may fix the shapes) only those with the same values are, and the sampler is left as is."""
    return any(r.config is not None and not r.config.params
               and recompiling(r.config, [r]) is not None for r in records)
