"""Checkpointing a transformers model turns its KV cache off (a recomputed block would append
its keys twice); a model without one is left alone."""

from __future__ import annotations

import types

import torch

from autotune.trial.compose import apply_model_features


class WithCache(torch.nn.Module):
    def __init__(self, use_cache: bool) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(use_cache=use_cache)
        self.block = torch.nn.Linear(2, 2)


def test_checkpointing_turns_a_models_kv_cache_off() -> None:
    model = WithCache(use_cache=True)
    _, wrapped = apply_model_features(model, [model.block], amp_dtype="fp32", checkpoint=1.0,
                                      compile="none")
    assert wrapped == 1
    assert model.config.use_cache is False


def test_without_checkpointing_the_cache_is_the_users() -> None:
    model = WithCache(use_cache=True)
    apply_model_features(model, [model.block], amp_dtype="fp32", checkpoint=0.0, compile="none")
    assert model.config.use_cache is True


def test_a_model_without_a_config_is_left_alone() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    _, wrapped = apply_model_features(model, [model[0]], amp_dtype="fp32", checkpoint=1.0,
                                      compile="none")
    assert wrapped == 1 and not hasattr(model, "config")
