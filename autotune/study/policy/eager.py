"""Cheap before dear: on a GPU, the eager trials before any compile, and no compile that cannot win.

An eager trial costs seconds on a GPU, a compile tens of seconds to minutes (GPT-2 small on an
H100: 22-42 s). After the baseline and the recipe (eager on a GPU), every amp dtype of the space
is measured eagerly at the leader's batch and loader knobs, a prior ordering them (bf16 first)
and skipping none: on a transformers GPT-2 with padded batches bf16 autocast ran 1.5x slower
than tf32 (H100, 2026-11-25). Then the knobs, one at a time and together (`scan`). Then the
ladder compiles what leads (`starts.follow_ups`).

A config is not paid for when measurements say it cannot beat the best so far:
- its step waits for a loader whose rate alone, measured by an input-bound trial with the same
  loader knobs, is below the best (the model's knobs, dtype or compile, cannot speed the loader);
- its compile mode ran slower than eager in this study, or its eager twin times the best gain
  that mode measured here stays below the best (the gains, `records.TrialRecord.compile_gains`);
  with no eager twin, its model's eager rate read under other loader knobs (a trial that hardly
  waited for its loader: `model_rate`) stands in for the twin's.

Nor is a compile of a step whose compile kept recompiling in an earlier trial with the same
adapter knobs (`recompiling`): every compile mode traces the same shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.config import TrainConfig
from autotune.contract.fmt import human
from autotune.contract.request import known_incompatible
from autotune.contract.result import RECOMPILING, Status
from autotune.study.policy.headroom import loader_alone
from autotune.study.policy.starts import EAGER, FOLLOW, Start
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured

__all__ = ["DTYPE_PRIOR", "DTYPE_RECHECK_GAIN", "GAIN_SLACK", "LOADER_MARGIN", "LOADER_ONLY",
           "cannot_win", "compile_gains", "compiled_dtypes", "dtype_starts", "gain_key", "gains_of",
           "kept_recompiling", "loader_ceiling", "recompiling"]

DTYPE_PRIOR = ("bf16", "tf32", "fp16", "fp32")
"""The order of the eager dtype trials (a prior: it orders, it never skips)."""
DTYPE_RECHECK_GAIN = 1.5
"""A compile mode that bought this much over its eager twin removed mostly launch overhead,
which every dtype pays alike: the eager dtypes' order says little of the compiled one's, and
the other dtypes are compiled too (`compiled_dtypes`). A GRU stepped in a Python loop (H100,
2026-11-26) ran eager at 153k tokens/s in bf16, 154k in tf32; the search compiled the tf32
leader with CUDA graphs (1.12M, 7.3x), and bf16 compiled alike, never tried, ran 1.52M."""
LOADER_MARGIN = 1.15
"""A step may read a little above its loader's rate alone, both being noisy (ResNet-18 on an
H100, bs 256, 12 workers: 3.74k images/s end to end, 3.43k with the loader alone: 1.09x)."""
GAIN_SLACK = 1.1
"""A compiled config is expected at its eager rate x the best gain its mode measured in this
study; within this factor of the best so far it still runs (gains differ between configs:
GPT-2 on an H100, bf16 `default`: 1.12x at bs 64, 1.16x at bs 8)."""

_LOADER_KNOBS = ("batch_size", "num_workers", "prefetch_factor", "pin_memory",
                 "persistent_workers")
LOADER_ONLY = _LOADER_KNOBS[1:]
"""Knobs that change how fast batches come, never what the model computes."""
MODEL_WAIT = 0.1
"""A trial that waited at most this share of its time for its loader measured its model: other
loader knobs would raise its rate at most to rate / (1 - wait)."""


def _loader(config: TrainConfig) -> tuple[object, ...]:
    # With the adapter's knobs, all of them: any may change what the loader does (`affects:`
    # is known to the space, not to the records this reads).
    return (*(getattr(config, name) for name in _LOADER_KNOBS), config.params)


def _measured(finished: Sequence[TrialRecord]) -> list[MeasuredRecord]:
    """Trials measured to the end by a process of their own (copies and refusals left out)."""
    return [r for r in measured(finished) if r.ok and r.value and r.duplicate_of is None]


def dtype_starts(space: SearchSpace, leader: TrainConfig, finished: Sequence[TrialRecord], *,
                 device: str) -> list[Start]:
    """Each amp dtype of the space not measured yet at `leader`'s batch and loader knobs,
    eager, in the prior's order (the fused optimizer comes after them, at the dtype that led:
    `scan.optimizer_start`)."""
    seen = {r.config for r in finished if r.config is not None and r.result is not None}
    return [(f"{EAGER}{c.describe()}", c)
            for c in _each_dtype(space, leader, device, compile="none") if c not in seen]


def compiled_dtypes(space: SearchSpace, finished: Sequence[TrialRecord], *, device: str
                    ) -> list[Start]:
    """When the best so far is compiled in a mode that bought at least DTYPE_RECHECK_GAIN over
    eager in this study, its config with each other amp dtype of the space that has not run
    compiled in that mode (any scope, any loader knobs), in the prior's order (`cannot_win`, in
    the ladder's feed, drops those whose eager rate times that gain stays below the best)."""
    ran = _measured(finished)
    best = max(ran, key=lambda r: r.rate, default=None)
    if best is None or best.config.compile == "none" or \
            compile_gains(finished).get(gain_key(best.config), 0.0) < DTYPE_RECHECK_GAIN:
        return []
    # A dtype compiled in that mode once, with any scope or loader knobs, has had its chance:
    # a held-out GRU loop on 2 CPUs compiled bf16 in its recipe (0.31x the compiled fp32 best)
    # and again with the loss compiled, 15 s for 0.40x.
    done = {r.config.amp_dtype for r in measured(finished)
            if r.config.compile == best.config.compile}
    return [(f"{FOLLOW}{c.describe()}", c)
            for c in _each_dtype(space, best.config, device) if c.amp_dtype not in done]


def _each_dtype(space: SearchSpace, base: TrainConfig, device: str, **changes: object
                ) -> list[TrainConfig]:
    """`base` (with `changes`) at each amp dtype of the space, in the prior's order, where the
    space holds it at that dtype and it can run on `device`."""
    configs = []
    for dtype in sorted(space.values("amp_dtype"), key=_prior):
        config = space.changed(base, amp_dtype=dtype, **changes)
        if config.amp_dtype == dtype and space.holds(config) \
                and known_incompatible(config, device) is None:
            configs.append(config)
    return configs


def _prior(dtype: str) -> int:
    return DTYPE_PRIOR.index(dtype) if dtype in DTYPE_PRIOR else len(DTYPE_PRIOR)


def loader_ceiling(config: TrainConfig, finished: Sequence[TrialRecord]
                   ) -> tuple[float, MeasuredRecord, float] | None:
    """The most `config` could read when a trial with its loader knobs (batch, workers,
    prefetch, pinning) was input-bound: LOADER_MARGIN x that trial's loader-alone rate (the
    lowest such bound), the trial and that rate; None when no such trial was diagnosed."""
    key = _loader(config)
    bounds = [(LOADER_MARGIN * alone, r, alone)
              for r in _measured(finished)
              if r.config != config and _loader(r.config) == key
              and (alone := loader_alone(r))]
    return min(bounds, key=lambda b: b[0]) if bounds else None


def compile_gains(finished: Sequence[TrialRecord], shapes_vary: bool | None = None
                  ) -> dict[str, float]:
    """The best gain each compile mode measured in this study (compiled over eager, the same
    config otherwise); with `shapes_vary`, only gains measured on steps whose shapes varied
    alike (or unknown): a compile of one shape is not a compile of many."""
    best: dict[str, float] = {}
    for record in finished:
        vary = record.result.shapes_vary if record.result is not None else None
        if shapes_vary is not None and vary is not None and vary != shapes_vary:
            continue
        for mode, gain in record.compile_gains.items():
            best[mode] = max(gain, best.get(mode, 0.0))
    return best


def gain_key(config: TrainConfig) -> str:
    """What a compile gain is recorded under: the mode, the scope when it is the loss (a
    compiled loss is another graph: its gain says nothing of the model's alone), and the layout
    when it is channels_last (Inductor lays convolutions out itself: a held-out DeepLabV3 read
    channels_last at 0.95x eager and 1.11x under CUDA graphs, H200, 2026-11-29)."""
    key = config.compile if config.compile_scope == "model" else f"{config.compile}+loss"
    return key if config.memory_format == "contiguous" else f"{key}+{config.memory_format}"


def gains_of(config: TrainConfig, rate: float, finished: Sequence[TrialRecord]
             ) -> dict[str, float]:
    """The gains a trial of `config` measured at `rate` completes: with its eager twin when it
    compiles, with each compiled twin measured before when it is eager."""
    gains: dict[str, float] = {}
    eager = config.replace(compile="none")
    for r in _measured(finished):
        if config.compile != "none" and r.config == eager:
            gains[gain_key(config)] = rate / r.rate
        elif config.compile == "none" and r.config.compile != "none" \
                and r.config.replace(compile="none") == config:
            gains[gain_key(r.config)] = r.rate / rate
    return gains


def cannot_win(config: TrainConfig, finished: Sequence[TrialRecord]
               ) -> tuple[float, str] | None:
    """The most `config` could read and why, when measurements say it stays below the best so
    far (see the module's docstring); None when it may win."""
    ran = _measured(finished)
    best = max((r.rate for r in ran), default=None)
    if best is None:
        return None
    bound = loader_ceiling(config, ran)
    if bound is not None and bound[0] < best:
        rate, by, alone = bound
        return rate, (f"not run: at most {human(rate)}/s: trial {by.number} with the same "
                      f"loader knobs waited for its loader, which alone delivers "
                      f"{human(alone)}/s, below the best so far "
                      f"({human(best)}/s); its model's knobs cannot speed the loader")
    if config.compile == "none":
        return None
    twin = next((r for r in ran if r.config == config.replace(compile="none")), None)
    model = model_rate(config, ran) if twin is None else None
    alike = twin if twin is not None else (model[1] if model is not None else None)
    gain = compile_gains(finished, None if alike is None else alike.result.shapes_vary
                         ).get(gain_key(config))
    if gain is not None and gain < 1.0:
        return gain * (twin.rate if twin is not None else best), (
            f"not run: compile={gain_key(config)} ran slower than eager in this study "
            f"(best gain {gain:.2f}x)")
    if gain is not None and model is not None and GAIN_SLACK * gain * model[0] < best:
        expected, by = gain * model[0], model[1]
        return expected, (f"not run: about {human(expected)}/s: its model eagerly (trial "
                          f"{by.number}, {human(by.rate)}/s under other loader knobs, waiting "
                          f"{by.result.data_wait_fraction or 0.0:.0%} for its loader) x the "
                          f"best gain of compile={gain_key(config)} here ({gain:.2f}x), below "
                          f"the best so far ({human(best)}/s)")
    if gain is not None and twin is not None and GAIN_SLACK * gain * twin.rate < best:
        expected = gain * twin.rate
        return expected, (f"not run: about {human(expected)}/s: its eager form (trial "
                          f"{twin.number}) x the best gain of compile={gain_key(config)} here "
                          f"({gain:.2f}x), below the best so far ({human(best)}/s)")
    return None


def recompiling(config: TrainConfig, finished: Sequence[TrialRecord]) -> TrialRecord | None:
    """The trial whose compile kept recompiling (`contract.result.RECOMPILING`) with `config`'s
    adapter knobs, when `config` compiles: its compile would not settle either (a padding knob
    of the adapter's may change the shapes, so only the same knobs count)."""
    if config.compile == "none":
        return None
    return next((r for r in finished if kept_recompiling(r)
                 and r.config is not None and r.config.params == config.params), None)


def kept_recompiling(record: TrialRecord) -> bool:
    """Whether `record`'s compile kept recompiling in warm-up (`contract.result.RECOMPILING`)."""
    return record.status is Status.ERROR and record.result is not None \
        and record.result.reason.startswith(RECOMPILING)


def model_rate(config: TrainConfig, ran: Sequence[MeasuredRecord]
               ) -> tuple[float, MeasuredRecord] | None:
    """The most `config`'s model ran eagerly, read from an eager trial of the same config but
    its loader-only knobs that waited at most MODEL_WAIT for its loader: its rate / (1 - wait),
    and the trial (the highest such bound). None when no such trial ran. A ViT-B/16 on an H100
    spent 39 s compiling an fp32 proposal whose eager fp32 ran 350 images/s against 2.3k."""
    def key(c: TrainConfig) -> dict[str, object]:
        return {k: v for k, v in c.to_dict().items() if k not in LOADER_ONLY}

    want = key(config.replace(compile="none"))
    bounds = [(r.rate / (1.0 - wait), r) for r in ran
              if r.config.compile == "none" and key(r.config) == want
              and (wait := r.result.data_wait_fraction) is not None and wait <= MODEL_WAIT]
    return max(bounds, key=lambda b: b[0]) if bounds else None
