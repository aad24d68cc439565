"""The sampler that proposes the search's configurations: multivariate TPE, or random search."""

from __future__ import annotations

import warnings

import optuna

__all__ = ["sampler"]


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
