"""The trial process: compose the user's step with one config, measure it, report JSON.

Run as `python -m autotune.trial.worker TRIAL_DIR`. The parent has already set the allocator
environment (it is read when CUDA starts, so it cannot be set from here in time) and reads
`TRIAL_DIR/result.json` when this process ends; window results stream to `events.jsonl`.
Every outcome the trial can name (ok, oom, nan, error) is a result, not a crash.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.adapter import defines
from autotune.contract.events import ComposedEvent
from autotune.contract.host import pin_to_share
from autotune.contract.in_compiler import compiler_note
from autotune.contract.phases import MEASURED, Phase
from autotune.contract.recompiles import SEPARATOR, divisor
from autotune.contract.request import LAUNCH_ENV, TrialRequest
from autotune.contract.result import RECOMPILING, Fingerprint, Status, TrialResult
from autotune.trial import compile_facts, steps
from autotune.trial.lifetime import die_with_parent
from autotune.trial.measure import NonFiniteLoss
from autotune.trial.warmup import RecompileStorm
from autotune.trial.progress import Progress
from autotune.trial.compile_facts import Compiled
from autotune.trial.peaks import Memory, memory
from autotune.trial.steps import Diagnosed, Preloaded, Timed

if TYPE_CHECKING:
    import torch

    from autotune.trial.compose import TrainStep
    from autotune.trial.rank import Rank

__all__ = ["Preloaded", "main", "run_trial", "serve"]


def run_trial(request: TrialRequest, events: Path | None = None,
              started: float | None = None, preloaded: Preloaded | None = None,
              rank: Rank | None = None) -> TrialResult:
    """Compose and measure one config; return its outcome (never raises for trial failures).

    `started` is the `perf_counter` time the process (or fork) began: what came before this
    call is the trial's start phase. An exception from the adapter's own code is marked in
    the result (`contract_error`) with the part of the adapter it came from. `rank`: this
    process is one rank of a DDP trial (`autotune.trial.rank`); it measures in lockstep
    with the others and skips the diagnosis (its steps would have to run on every rank)."""
    progress = Progress(events, started)
    progress.enter(Phase.IMPORT)
    steps.import_trial_code()
    import torch

    from autotune.trial.blame import blamed
    from autotune.trial.features.compile import specialized
    from autotune.trial.oom import is_oom_error

    device = torch.device(request.device) if rank is None else rank.device(request.device)
    got = _Reached()
    try:
        _take_steps(request, device, progress, got, preloaded=preloaded, rank=rank,
                    folder=None if events is None else events.parent)
        progress.enter("")
        result = _result(got, memory(device), status=Status.OK)
    except NonFiniteLoss as exc:
        result = _result(got, memory(device), status=Status.NAN, reason=str(exc))
    except RecompileStorm as exc:
        result = _storm(got, memory(device), exc)
    except Exception as exc:  # the trial's outcome: classified, with its traceback in the log
        traceback.print_exc()
        if rank is not None:
            rank.failed(exc)
        said = specialized(exc)  # a varying dimension `compose` marked dynamic, specialized
        result = _storm(got, memory(device), RecompileStorm(
            steps=1, recompiling=0, seconds=0.0, specialized=said)) if said is not None else \
            _result(got, memory(device), status=Status.OOM if is_oom_error(exc) else Status.ERROR,
                    reason=_reason(exc, request.adapter), contract_error=blamed(exc))
    finally:
        if got.step is not None:
            got.step.close()
    progress.enter("")
    return result.replace(phases=progress.seconds)


def _reason(exc: BaseException, adapter: str) -> str:
    """The error on one line; when the adapter's code raised it, with the adapter's line."""
    from autotune.trial.blame import blamed, where_in

    line = where_in(exc, adapter) if blamed(exc) else ""
    return steps.one_line(exc) + (f" ({line})" if line else _in_compiler(exc))


COMPILER = re.compile(r"/(torch/(?:_inductor|_dynamo|_functorch|fx)/[^/].*)$")
"""torch.compile's own code, by file path."""


def _in_compiler(exc: BaseException) -> str:
    """Where in torch.compile's own code `exc` was raised (its innermost frame), as the note
    of `contract.in_compiler`; "" when elsewhere."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    path = "" if tb is None else tb.tb_frame.f_code.co_filename.replace("\\", "/")
    found = COMPILER.search(path)
    if tb is None or found is None:
        return ""
    return compiler_note(found.group(1), tb.tb_lineno, tb.tb_frame.f_code.co_name)


@dataclasses.dataclass
class _Reached:
    """What the trial got to, filled in as its steps finish: a trial that fails still reports
    what it knew (where it ran, what the CPUs did while it was timed)."""

    unit: str = "samples"
    """The adapter's unit, once it is loaded."""
    fingerprint: Fingerprint | None = None
    step: TrainStep | None = None
    """The composed step (closed whatever the outcome)."""
    timed: Timed | None = None
    compiled: Compiled | None = None
    """None: the config does not compile."""
    diagnosed: Diagnosed = Diagnosed()


def _take_steps(request: TrialRequest, device: torch.device, progress: Progress,
                got: _Reached, *, preloaded: Preloaded | None, rank: Rank | None,
                folder: Path | None) -> None:
    """The trial's steps in order, each one's outcome kept in `got`; raises what they raise."""
    steps.prepare(request, device)
    adapter_cls, dataset = steps.load(request, preloaded)
    got.unit = adapter_cls.unit
    # Starting the device (CUDA's first call takes seconds) is a phase of its own.
    progress.enter(Phase.DEVICE)
    got.fingerprint = steps.start_device(device, rank)
    got.step = step = steps.build(adapter_cls, dataset, request.config, device, progress, rank)
    progress.emit(ComposedEvent())
    progress.enter(Phase.FIRST_BATCH)
    step.start_loader()
    progress.enter(Phase.WARMUP)
    settings = steps.settings_for(request.config, request.measure,
                                  epoch_batches=step.epoch_batches())
    got.timed = timed = steps.time_step(step, request, settings, progress, rank, device)
    if request.config.compile != "none":
        got.compiled = compile_facts.compiled(request, folder,
                                              dynamic_shapes=step.dynamic_shapes)
    if steps.worth_diagnosing(request, timed, progress, rank):
        progress.enter(Phase.DIAGNOSIS)  # the windows' phase closed: its seconds are known
        if folder is not None:  # kept if the diagnosis is killed at the trial's limit
            _result(got, memory(device), status=Status.OK).replace(
                phases=dict(progress.seconds)).save(folder / MEASURED)
        got.diagnosed = steps.diagnosed(step, timed, settings.prefetch_batches)


def _result(got: _Reached, memory: Memory, *, status: Status, reason: str = "",
            contract_error: str = "") -> TrialResult:
    """The trial's result: what it got to, and its measurement when it is ok."""
    timed, compiled = got.timed, got.compiled
    m = timed.measurement if status is Status.OK and timed is not None else None
    return TrialResult(
        status=status, reason=reason, contract_error=contract_error, unit=got.unit,
        throughput=None if m is None else m.throughput,
        spread=None if m is None else m.spread,
        uncertainty=None if m is None or not math.isfinite(m.uncertainty) else m.uncertainty,
        step_seconds=None if m is None else m.step_seconds,
        data_wait_fraction=None if m is None else m.data_wait_fraction,
        warmup_steps=None if m is None else m.warmup_steps,
        warmup_seconds=None if m is None else m.warmup_seconds,
        compile_seconds=None if m is None else m.compile_seconds,
        windows=None if m is None else len(m.windows),
        converged=None if m is None else m.converged,
        rising_windows=None if m is None else m.rising_windows,
        new_shape_windows=None if m is None else m.new_shape_windows,
        settled=None if m is None else m.settled,
        window_throughputs=() if m is None else tuple(w.throughput for w in m.windows),
        peak_allocated_mb=memory.peak_allocated_mb, peak_reserved_mb=memory.peak_reserved_mb,
        peak_rss_mb=memory.peak_rss_mb,
        blocks_checkpointed=None if got.step is None else got.step.blocks_checkpointed,
        conv_weights=None if got.step is None else got.step.conv_weights,
        optimizer_impls=None if got.step is None else got.step.optimizer_impls,
        compile_cache_hits=None if compiled is None else compiled.cache_hits,
        compile_cache_misses=None if compiled is None else compiled.cache_misses,
        compile_artifacts="" if compiled is None else compiled.artifacts,
        dynamic_shapes=None if compiled is None else compiled.dynamic_shapes,
        compiled_graphs=(None if timed is None or timed.recompiles is None
                         else timed.recompiles.first_graphs),
        recompiles=None if timed is None or timed.recompiles is None else timed.recompiles.count,
        recompile_seconds=(None if timed is None or timed.recompiles is None
                           else timed.recompiles.seconds),
        recompile_reason="" if timed is None or timed.recompiles is None
        else SEPARATOR.join(timed.recompiles.reasons),
        shapes_vary=None if timed is None else timed.shapes.vary,
        shape_range=None if timed is None else timed.shapes.ranges,
        shape_count=None if timed is None else timed.shapes.count,
        shape_count_padded=None if timed is None else timed.shapes.padded,
        batch_items=None if got.step is None else got.step.shapes.amounts.mean_items(),
        epoch_batches=None if got.step is None else got.step.epoch_batches(),
        batch_numel=None if got.step is None else got.step.shapes.amounts.mean_numel(),
        # The tool's own DataLoader only: a make_loader may move batches its workers made.
        batch_device=None if got.step is None or defines(type(got.step.adapter), "make_loader")
        else got.step.shapes.device,
        fingerprint=got.fingerprint,
        diagnosis=got.diagnosed.diagnosis, diagnosis_error=got.diagnosed.error,
        host_cpu=None if timed is None else timed.host_cpu,
        noise=None if timed is None else timed.noise,
    )


def _storm(got: _Reached, memory: Memory, exc: RecompileStorm) -> TrialResult:
    """An error the sampler learns from, saying which shapes kept the compile going."""
    shapes = got.step.shapes.facts() if got.step is not None else None
    seen = ("" if shapes is None or not shapes.vary else
            f"; its batches' shapes vary ({shapes.ranges or 'structure'}, {shapes.count} "
            "distinct so far)")
    multiple = divisor(SEPARATOR.join(exc.reasons))
    why = "" if not exc.reasons else f" (the last guard that failed: {exc.reasons[-1]})"
    pad = (f"Pad the varying lengths to a multiple of {multiple} (Dynamo's guards test "
           "their divisibility)" if multiple else
           "Pad the varying dimensions to a few sizes")
    reason = (f"{RECOMPILING}: {exc}{why}{seen}. {pad}, or search with a space file whose "
              "compile is [none] (--space)")
    specialized = bool(exc.specialized)  # ended with its first compile: no recompile counted
    return _result(got, memory, status=Status.ERROR, reason=reason).replace(
        recompiles=None if specialized else exc.recompiling,
        recompile_seconds=None if specialized else exc.seconds,
        recompile_reason=SEPARATOR.join(exc.reasons),
        shapes_vary=None if shapes is None else shapes.vary,
        shape_range=None if shapes is None else shapes.ranges,
        shape_count=None if shapes is None else shapes.count,
        shape_count_padded=None if shapes is None else shapes.padded)


def serve(trial_dir: Path, *, started: float, preloaded: Preloaded | None = None) -> int:
    """Run the trial whose request is in `trial_dir`; write its result there."""
    request = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    result = run_trial(request, events=trial_dir / "events.jsonl", started=started,
                       preloaded=preloaded)
    result = result.replace(duration_seconds=time.perf_counter() - started)
    result.save(trial_dir / "result.json")
    print(f"autotune trial {request.number}: {result.status.value} {result.reason}".rstrip())
    return 0


def main(argv: list[str] | None = None) -> int:
    # The parent stamps when it launched this process: start-up (interpreter, imports) counts
    # as the trial's "start" phase.
    launched = float(os.environ.get(LAUNCH_ENV) or time.time())
    started = time.perf_counter() - max(0.0, time.time() - launched)
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autotune.trial.worker TRIAL_DIR", file=sys.stderr)
        return 2
    die_with_parent()
    pin_to_share()  # before torch starts its thread pool
    return serve(Path(args[0]), started=started)


if __name__ == "__main__":
    sys.exit(main())
