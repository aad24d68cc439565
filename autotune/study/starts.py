"""Where a search starts: the baseline, the hand recipe, then follow-ups the diagnosis points at.

A short budget cannot afford random exploration of ten knobs. After the baseline and the
common hand recipe, the recipe's own diagnosis says which knob to push first: an input-bound
step wants every core loading, a compute- or overhead-bound one a larger batch. The sampler
(TPE) takes over from there.
"""

from __future__ import annotations

import optuna

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.result import Verdict
from autotune.study import records
from autotune.study.recipes import hand_recipe
from autotune.study.searchspace import SearchSpace

__all__ = ["enqueue", "follow_ups", "initial_starts"]

Start = tuple[str, TrainConfig]


def initial_starts(space: SearchSpace, adapter: type[Adapter], *, device: str, cpus: int) -> list[Start]:
    starts = [(records.BASELINE, space.baseline)]
    recipe = hand_recipe(adapter, device=device, cpus=cpus)
    if space.holds(recipe):
        starts.append(("recipe", recipe))
    return starts


def follow_ups(space: SearchSpace, recipe: TrainConfig, verdict: Verdict | None) -> list[Start]:
    """Configs to try right after the recipe, given its verdict."""
    candidates: list[Start] = []
    if verdict is Verdict.INPUT:
        workers = max((w for w in space.values("num_workers") if isinstance(w, int)), default=0)
        if workers > recipe.num_workers:
            candidates.append((f"recipe-workers{workers}", recipe.replace(num_workers=workers)))
    elif verdict in (Verdict.COMPUTE, Verdict.OVERHEAD):
        # The batch is the knob with the most effect on a GPU-bound step; an OOM at the larger
        # size teaches the sampler where memory ends.
        for size in sorted(b for b in space.batch_sizes() if b > recipe.batch_size)[:2]:
            candidates.append((f"recipe-bs{size}", space.with_batch(recipe, size)))
    return [(role, c) for role, c in candidates if space.holds(c)]


def enqueue(study: optuna.Study, space: SearchSpace, starts: list[Start]) -> None:
    """Enqueue each start unless a trial of that role is already done, running or waiting."""
    for role, config in starts:
        if not records.role_taken(study, role):
            records.enqueue_config(study, space.params_for(config), role)
