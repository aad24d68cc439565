"""Where a search starts: the baseline, the hand recipe, then follow-ups the diagnosis points at.

A short budget cannot afford random exploration of ten knobs. After the baseline and the
common hand recipe (eager on a GPU, where every amp dtype is then measured eagerly before any
compile: `eager`), each guided trial's diagnosis says which knob to push next: an input-bound
step wants the free cores loading and the batch its loader serves best, a compute-bound one a
larger batch, an overhead-bound one CUDA graphs. The ladder climbs while it pays; then TPE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import optuna
from optuna.trial import TrialState

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.result import Status, Verdict
from autotune.study.policy.graphs import graphs_check, many_shapes
from autotune.study.policy.headroom import below_loader, compile_may_pay, loader_near
from autotune.study.policy.loader_steps import free_workers, loader_climb, threads_beside
from autotune.study.policy.recipes import hand_recipe
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records
from autotune.study.store.records import TrialRecord

__all__ = ["EAGER", "EXPLORE", "diagnosed_recipe", "eager_live", "follow_ups", "initial_starts",
           "prunable", "stoppable", "unmeasured"]

Start = tuple[str, TrainConfig]

FOLLOW = "follow: "
"""The role prefix of a guided follow-up."""
EAGER = "eager: "
"""The role prefix of an eager trial of the scan (`scan.DtypeStage`: dtypes, knobs one at a time
and together) or of the one-shape stage: fed before any other start."""


EXPLORE = "explore"
"""The role prefix of a random config not measured yet, queued when the sampler proposed a
config measured before: the budget buys a new configuration instead of a copy."""


def eager_live(records: Sequence[TrialRecord]) -> bool:
    """Whether an eager trial is enqueued or running (on several devices, one running on
    another is not measured yet): `records` holds the study's unfinished trials too."""
    return any(r.role.startswith(EAGER)
               and r.state in (TrialState.RUNNING, TrialState.WAITING) for r in records)


def prunable(role: str) -> bool:
    """The sampler's own trials and exploration may be pruned by their windows; the guided
    starts (baseline, recipe, follow-ups) are measured to the end, or stopped in warm-up only
    (`stoppable`): every ratio and the ladder depend on them."""
    return role == "" or role.startswith(EXPLORE)


def stoppable(role: str) -> bool:
    """Trials that may be stopped in warm-up when they run at a fraction of the best
    (`pruning.HOPELESS`): every one but the baseline, whose rate every ratio is told against.
    A recipe, follow-up or eager trial that slow changes no choice of the ladder's, which climbs
    from the best (a transformers BERT's bf16 recipe on 2 CPUs ran 41 s of a 100-s search at
    0.11x the baseline, its warm-up at 0.09x)."""
    return role != records.BASELINE


def unmeasured(space: SearchSpace, new: Callable[[TrainConfig], bool], *, seed: int | None,
               draws: int = 50) -> TrainConfig | None:
    """A random config of the space for which `new` holds (not measured, not refused), or
    None when `draws` random draws found none (a small space, spent)."""
    scratch = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(draws):
        config = space.suggest(scratch.ask())
        if new(config):
            return config
    return None


def initial_starts(space: SearchSpace, adapter: type[Adapter], *, device: str, cpus: int) -> list[Start]:
    starts = [(records.BASELINE, space.baseline)]
    # The recipe as near as the space allows (a space without pinning gets it unpinned),
    # eager: a compile costs tens of seconds (a minute and a half on a busy 2-CPU VM, of a
    # 150-s search), and it comes once the eager trials lead.
    recipe = space.project(hand_recipe(adapter, device=device, cpus=cpus).replace(compile="none"))
    if space.holds(recipe) and recipe != space.baseline:
        starts.append((records.RECIPE, recipe))
    return starts


def diagnosed_recipe(space: SearchSpace, recipe: TrainConfig, baseline: TrialRecord, *,
                     device: str, cpus: int | None = None) -> TrainConfig:
    """The hand recipe (eager, `initial_starts`) as the baseline's diagnosis points it: the free
    cores loading when the baseline is input-bound (with the baseline's dtype on a GPU: no dtype
    trial while the loader is the limit); the largest batch when it is compute-bound (the device
    is used better the more it is given) or overhead-bound (a launch-bound step takes about as
    long at any batch; CUDA graphs come once the eager trials lead). Each is a step the ladder
    would take after the recipe anyway, and each step skipped is a trial saved. A batch that
    does not fit is halved back from there (`_bisect`). Unchanged when the baseline was not
    diagnosed."""
    verdict = baseline.verdict
    if verdict is Verdict.INPUT:
        workers = free_workers(space, cpus)
        dtype = space.baseline.amp_dtype if device == "cuda" else recipe.amp_dtype
        more = space.changed(recipe, num_workers=max(workers, recipe.num_workers), amp_dtype=dtype)
        more = threads_beside(space, more, cpus) or more
        return more if space.holds(more) else recipe
    if verdict not in (Verdict.COMPUTE, Verdict.OVERHEAD):
        return recipe
    larger = [b for b in space.batch_sizes() if b > recipe.batch_size]
    tuned = space.with_batch(recipe, larger[-1]) if larger else recipe
    return tuned if space.holds(tuned) else recipe


def follow_ups(space: SearchSpace, done: TrialRecord, best: TrialRecord | None, *,
               device: str, cpus: int | None = None) -> list[Start]:
    """What an expert tries after a guided trial: climb first, then check the choices made.

    A guided step that becomes the best climbs on: CUDA graphs (`reduce-overhead`) when it
    is overhead-bound (a dynamic-shape compile on batches of many shapes: `graphs`); when
    input-bound, a compile first where the step runs below its loader's rate on a GPU
    (`headroom.below_loader`), then the free cores loading (`loader_steps`), a deeper prefetch,
    every core when the CPUs have room, then the batches on either side (an input-bound step's
    rate follows its loader's, which the batch moves either way); else the next larger batch.
    Where the climb stops (no larger batch, or a step that did not beat the best, or ran out of
    memory: the wall, beyond which batches are implied out of memory), the best config's own
    choices are checked one knob at a time (`_checks`): compile on or off, and on a CPU, where
    loader workers take cores from the step's own threads, no workers.
    """
    if done.config is None or done.result is None or best is None or best.config is None \
            or best.result is None:
        return []
    config = best.config
    verdict = best.verdict
    if best.number != done.number:
        between = _bisect(space, done, best)
        if between is not None:
            return _label(space, [between])
        if done.role != records.RECIPE:
            return _label(space, _checks(space, best, device))
    climb: list[TrainConfig] = []
    if verdict is Verdict.OVERHEAD:
        # CUDA graphs replay the whole step's kernels with one launch (torch.compile docs); on
        # batches of many shapes, a graph each (`graphs`): a dynamic-shape compile instead.
        mode = "default" if device == "cuda" and many_shapes(best.result) else "reduce-overhead"
        wanted = config.compile == "none" if mode == "default" else config.compile != mode
        if wanted and mode in space.values("compile"):
            climb.append(config.replace(compile=mode))
    if verdict is Verdict.INPUT:
        compiled = _compiled(space, best, device)
        if compiled is not None and below_loader(best):
            climb.append(compiled)  # before the loader's knobs
        climb += loader_climb(space, config, best, cpus)
    elif config.num_workers == 0 and (best.result.data_wait_fraction or 0.0) >= 0.05:
        # Not input-bound, yet the step waited for data: loading in the training process
        # takes host time the step needs (CUDA graphs leave little else on the host).
        workers = [w for w in space.values("num_workers") if isinstance(w, int) and w > 0]
        if workers:
            climb.append(space.changed(config, num_workers=workers[len(workers) // 2]))
    larger = sorted(b for b in space.batch_sizes() if b > config.batch_size)
    if larger:
        if verdict in (Verdict.OVERHEAD, Verdict.COMPUTE) and not loader_near(best):
            # A launch-bound step takes about as long at any batch, and a compute-bound one
            # uses the device better the more it is given: try the largest at once. If it
            # does not fit, the ladder halves the way back (`_bisect`); each rung skipped is
            # a compile saved. Not with a loader near the step's rate (`loader_near`): the
            # largest batch may wait for it at a lower rate, one rung at a time then.
            climb.append(space.with_batch(config, larger[-1]))
        else:
            climb.append(space.with_batch(config, larger[0]))
    smaller = [b for b in space.batch_sizes() if b < config.batch_size]
    if verdict is Verdict.INPUT and smaller:
        climb.append(space.with_batch(config, smaller[-1]))
    if not larger:
        climb += [c for c in _checks(space, best, device) if c not in climb]
    return _label(space, climb)


def _bisect(space: SearchSpace, done: TrialRecord, best: TrialRecord) -> TrainConfig | None:
    """After a larger batch than the best's ran out of memory, the batch halfway between them
    (the best config's other knobs kept), while one is left between. The recipe's climb (tried
    at the largest batch, `diagnosed_recipe`) halves from the user's batch, keeping its knobs."""
    if done.status is not Status.OOM or done.config is None or best.config is None:
        return None
    low, high = best.config.batch_size, done.config.batch_size
    if space.with_batch(done.config, low) != best.config:
        if done.role != records.RECIPE and not done.role.startswith((FOLLOW, EAGER)):
            return None  # the OOM was another config's, not a climb's
        low = space.baseline.batch_size  # it ran (as the baseline)
    between = [b for b in space.batch_sizes() if low < b < high]
    return space.with_batch(done.config, between[len(between) // 2]) if between else None


def _checks(space: SearchSpace, best: TrialRecord, device: str) -> list[TrainConfig]:
    """Whether the best config's own choices pay: each one undone (or done) alone.

    Compile first (the most at stake; an input-bound step only where it may pay:
    `headroom.compile_may_pay`); at a compiled best
    the loader does not limit, the other compile scope and the other optimizer implementation,
    and on CUDA, for a model with convolutions, the other memory format (a cold compile). Then,
    on a GPU, choices that cost host resources or memory but keep the compiled graph
    (each check a cache hit): at a compiled best, the next shallower prefetch; fewer loader
    workers when the step is not input-bound, pinning,
    the allocator's expandable segments. A check that ties keeps the cheaper config in the
    confirmation."""
    assert best.config is not None
    config, verdict = best.config, best.verdict
    checks = []
    compiles = space.values("compile")
    if config.compile != "none" and "none" in compiles:
        checks.append(config.replace(compile="none"))
    elif (compiled := _compiled(space, best, device)) is not None:
        checks.append(compiled)
    if config.compile == "none" and (graphs := graphs_check(space, best, device)) is not None:
        checks.append(graphs)
    scopes = [s for s in space.values("compile_scope") if s != config.compile_scope]
    if config.compile != "none" and verdict is not Verdict.INPUT and scopes:
        # The loss compiled with the model: a loss outside the model runs eagerly otherwise
        # (GPT-2 small's cross-entropy over 50k logits: about a fifth of its compiled step's
        # GPU time in fp32 copies and softmax kernels, H100, 2026-11-25).
        checks.append(config.replace(compile_scope=scopes[0]))
    takes = best.result.optimizer_impls if best.result is not None else None
    impls = [i for i in space.values("optimizer_impl") if i != config.optimizer_impl
             and (takes is None or i in takes)]  # not a flag the optimizer lacks
    if config.compile != "none" and verdict is not Verdict.INPUT and impls:
        # Not compiled, so a cache hit too. Eager, the fused trial of the padded transformers
        # GPT-2 read 0.89x in its noise; compiled, the step shrinks and the optimizer's share grows.
        other = "fused" if "fused" in impls else impls[0]  # foreach is CUDA's default already
        checks.append(space.changed(config, optimizer_impl=other))
    if config.compile != "none" and device == "cuda" and verdict is not Verdict.INPUT \
            and _convolutions(best):
        # A cold compile: the eager scan's layout does not carry over. A held-out DeepLabV3
        # read NHWC at 0.95x eager (fp16) and 1.11x compiled (bf16, CUDA graphs; H200, 2026-11-29).
        checks += [space.changed(config, memory_format=m) for m in space.values("memory_format")
                   if m != config.memory_format][:1]
    workers = space.values("num_workers")
    if device == "cpu" and config.num_workers and 0 in workers:
        checks.append(space.changed(config, num_workers=0))
        if config.compile != "none" and "none" in compiles:
            checks.append(space.changed(config, num_workers=0, compile="none"))
    if device != "cpu":
        # The prefetch depth was climbed for the eager step: a timm ViT compiled at depth 8
        # ran 0.95x its twin at 4 side by side (3 rounds, H100, 2026-11-27).
        shallower = [p for p in space.values("prefetch_factor")
                     if p and p < (config.prefetch_factor or 0)]
        if config.compile != "none" and config.num_workers and shallower:
            checks.append(config.replace(prefetch_factor=max(shallower)))
        fewer = [w for w in workers if isinstance(w, int) and 0 < w <= config.num_workers // 4]
        if verdict is not Verdict.INPUT and fewer:
            checks.append(space.changed(config, num_workers=fewer[-1]))
        if config.num_workers and len(space.values("pin_memory")) > 1:
            checks.append(config.replace(pin_memory=not config.pin_memory))
        if len(space.values("expandable_segments")) > 1:
            checks.append(config.replace(expandable_segments=not config.expandable_segments))
    return checks


CONV_NET = 4
"""Convolution weights from which a model is a convolutional network whose layout the compiled
best checks: a ViT's one patch embedding or a speech encoder's two-convolution front end is not."""


def _convolutions(record: TrialRecord) -> bool:
    """Whether `record`'s trial counted CONV_NET convolution weights or more (`conv_weights`)."""
    return record.result is not None and (record.result.conv_weights or 0) >= CONV_NET


def _compiled(space: SearchSpace, best: TrialRecord, device: str) -> TrainConfig | None:
    """The eager best compiled (`default`), where the space holds it and it may pay
    (`headroom.compile_may_pay`); else None."""
    assert best.config is not None
    if best.config.compile != "none" or "default" not in space.values("compile") \
            or not compile_may_pay(best, device):
        return None
    return best.config.replace(compile="default")


def _label(space: SearchSpace, configs: list[TrainConfig]) -> list[Start]:
    return [(f"{FOLLOW}{c.describe()}", c) for c in configs if space.holds(c)]
