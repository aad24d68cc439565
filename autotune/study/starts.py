"""Where a search starts: the baseline, the hand recipe, then follow-ups the diagnosis points at.

A short budget cannot afford random exploration of ten knobs. After the baseline and the
common hand recipe, each guided trial's own diagnosis says which knob to push next: an
input-bound step wants every core loading, a compute-bound one a larger batch, an
overhead-bound one CUDA graphs and a larger batch. The ladder climbs while it pays; the
sampler (TPE) takes over when it stops.
"""

from __future__ import annotations

import optuna

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.result import Verdict
from autotune.study import records
from autotune.study.recipes import hand_recipe
from autotune.study.records import TrialRecord
from autotune.study.searchspace import SearchSpace

__all__ = ["enqueue", "follow_ups", "initial_starts"]

Start = tuple[str, TrainConfig]


def initial_starts(space: SearchSpace, adapter: type[Adapter], *, device: str, cpus: int) -> list[Start]:
    starts = [(records.BASELINE, space.baseline)]
    # The recipe as near as the space allows (a space without pinning gets it unpinned).
    recipe = space.project(hand_recipe(adapter, device=device, cpus=cpus))
    if space.holds(recipe) and recipe != space.baseline:
        starts.append(("recipe", recipe))
    return starts


def follow_ups(space: SearchSpace, done: TrialRecord, best: TrialRecord | None, *,
               device: str) -> list[Start]:
    """What an expert tries after a guided trial: climb first, then check the choices made.

    A guided step that becomes the best climbs on: CUDA graphs (`reduce-overhead`) when it
    is overhead-bound; every core loading and a deeper prefetch when input-bound; the next
    larger batch. Where the climb stops (no larger batch, or a step that did not beat the best,
    or ran out of memory: the wall, beyond which batches are implied out of memory), the best
    config's own choices are checked one knob at a time: compile on or off, and on a CPU, where
    loader workers take cores from the step's own threads, no workers.
    """
    if done.config is None or done.result is None or best is None or best.config is None \
            or best.result is None:
        return []
    if best.number != done.number and done.role != "recipe":
        return _label(space, _checks(space, best.config, device))
    config = best.config
    diagnosis = best.result.diagnosis
    verdict = diagnosis.verdict if diagnosis is not None else None
    climb: list[TrainConfig] = []
    if verdict is Verdict.OVERHEAD and "reduce-overhead" in space.values("compile") \
            and config.compile != "reduce-overhead":
        # CUDA graphs replay the whole step's kernels with one launch (torch.compile docs).
        climb.append(config.replace(compile="reduce-overhead"))
    if verdict is Verdict.INPUT:
        workers = max((w for w in space.values("num_workers") if isinstance(w, int)), default=0)
        if workers > config.num_workers:
            climb.append(space.changed(config, num_workers=workers))
        prefetch = max((p for p in space.values("prefetch_factor") if p), default=None)
        if prefetch and (config.prefetch_factor or 2) < prefetch and config.num_workers:
            climb.append(config.replace(prefetch_factor=prefetch))
    elif config.num_workers == 0 and (best.result.data_wait_fraction or 0.0) >= 0.05:
        # Not input-bound, yet the step waited for data: loading in the training process
        # takes host time the step needs (CUDA graphs leave little else on the host).
        workers = [w for w in space.values("num_workers") if isinstance(w, int) and w > 0]
        if workers:
            climb.append(space.changed(config, num_workers=workers[len(workers) // 2]))
    larger = sorted(b for b in space.batch_sizes() if b > config.batch_size)
    if larger:
        climb.append(space.with_batch(config, larger[0]))
        if verdict is Verdict.OVERHEAD and len(larger) > 1:
            # A launch-bound step takes about as long at any batch: its rate grows with the
            # batch, so try the largest at once (the memory wall stops it if it does not fit).
            climb.append(space.with_batch(config, larger[-1]))
    else:
        climb += _checks(space, config, device)
    return _label(space, climb)


def _checks(space: SearchSpace, config: TrainConfig, device: str) -> list[TrainConfig]:
    """Whether the best config's own choices pay: each one undone (or done) alone."""
    checks = []
    compiles = space.values("compile")
    if config.compile != "none" and "none" in compiles:
        checks.append(config.replace(compile="none"))
    elif config.compile == "none" and "default" in compiles:
        checks.append(config.replace(compile="default"))
    if device == "cpu" and config.num_workers and 0 in space.values("num_workers"):
        checks.append(space.changed(config, num_workers=0))
        if config.compile != "none" and "none" in compiles:
            checks.append(space.changed(config, num_workers=0, compile="none"))
    return checks


def _label(space: SearchSpace, configs: list[TrainConfig]) -> list[Start]:
    return [(f"follow: {c.describe()}", c) for c in configs if space.holds(c)]


def enqueue(study: optuna.Study, space: SearchSpace, starts: list[Start]) -> None:
    """Enqueue each start unless a trial of that role is already done, running or waiting."""
    for role, config in starts:
        if not records.role_taken(study, role):
            records.enqueue_config(study, space.params_for(config), role)
