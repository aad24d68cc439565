"""Whether compiling the model can speed an input-bound step: read from one trial's diagnosis.

The loader-alone rate of an input-bound trial is a ceiling on what any knob of the model can
reach, when it can be believed (`contract.consistency`: never below what the loader fed end to
end). The model's knobs move nothing while the model alone (data resident) runs MODEL_HEADROOM x
that rate and the step runs at its loader's rate. Short of either, an input-bound step can still
gain from a compile: its loader's last stage (the batches taken from the workers and pinned)
shares the training process with the step's launches. A held-out timm ViT-S with 15 workers on
16 CPUs, waiting 36% of its step for data, ran 1.18x compiled side by side (2,093 against 1,773
images/s, H100, 2026-11-27). Its probes, run to run: model alone 2.7k and loader alone 2.2k
beside 2.3k end to end (1.23x); 4.3k and 3.5k beside 2.0k (1.22x, and the step at 0.56 of its
loader's rate). Neither reading crossed 1.25x, but both sat within noise of it: the second says
why the ratio alone is not enough (AT_LOADER), a case no measured run has crossed yet.
"""

from __future__ import annotations

from autotune.contract.consistency import contradicted
from autotune.contract.result import Verdict
from autotune.study.store.records import TrialRecord

__all__ = ["AT_LOADER", "LOADER_NEAR", "MODEL_HEADROOM", "below_loader", "compile_may_pay",
           "loader_alone", "loader_near", "model_outpaces"]

MODEL_HEADROOM = 1.25
"""How much faster than its loader a trial's model must run alone (data resident) for a
compile of the model to move nothing: the step then waits for the loader whatever the model
does."""

LOADER_NEAR = 1.5
"""A loader alone this many times the step's rate, or less, is near enough to be the limit at a
larger batch: each batch moves that many more bytes through the workers' queue and the pinning
thread. A held-out MobileNetV3 on an H200 (2026-11-28), float32 images from 15 workers:
overhead-bound at batch 96 (2.48k images/s, its loader alone 3.27k); at 768 it ran 1.1-1.5k,
and its warm-up was cut at the search's end after 33 s."""

AT_LOADER = 0.85
"""A step reading at least this share of its loader-alone rate runs at its loader's rate (a
probe reads 10-15% either way: a ResNet-18 on an H100 ran 3.74k images/s end to end beside 3.43k
alone). Further below, time is lost between the loader and the model, in the process they
share."""


def loader_alone(record: TrialRecord) -> float | None:
    """The loader-alone rate of a trial diagnosed input-bound (else None, as for a probe below
    what the loader fed end to end: `contradicted`)."""
    diagnosis = record.result.diagnosis if record.result is not None else None
    if diagnosis is None or diagnosis.verdict is not Verdict.INPUT:
        return None
    return _believed_loader(record)


def _believed_loader(record: TrialRecord) -> float | None:
    """The trial's loader-alone rate, whatever its verdict, unless its probe read below what
    the loader fed end to end (`contradicted`) or is missing."""
    diagnosis = record.result.diagnosis if record.result is not None else None
    if diagnosis is None or not diagnosis.loader_rate or contradicted(
            throughput=diagnosis.throughput, loader_rate=diagnosis.loader_rate,
            compute_rate=None)[0]:
        return None
    return diagnosis.loader_rate


def model_outpaces(record: TrialRecord) -> bool:
    """Whether `record` waited for its loader (input-bound, a loader rate to trust) and ran at
    its rate (AT_LOADER) while its model alone ran at least MODEL_HEADROOM x that rate."""
    loader = loader_alone(record)
    if not loader or record.result is None or record.result.diagnosis is None:
        return False
    diagnosis = record.result.diagnosis
    model = diagnosis.compute_rate
    return bool(model and model >= MODEL_HEADROOM * loader
                and diagnosis.throughput >= AT_LOADER * loader)


def compile_may_pay(best: TrialRecord, device: str) -> bool:
    """Whether compiling the best (eager) config may pay: a step not input-bound; on a GPU, an
    input-bound one too unless its model outpaces its loader (`model_outpaces`). Not on a CPU,
    where the compiled model runs on the cores the workers load on (the quick start's
    input-bound CNN on 2 cores: 4.86k compiled, 4.96k eager)."""
    if best.verdict is not Verdict.INPUT:
        return True
    return device != "cpu" and not model_outpaces(best)


def below_loader(record: TrialRecord) -> bool:
    """Whether `record` ran below AT_LOADER x its loader-alone rate (a rate to trust): its loader
    could deliver more than the step takes, so what is lost lies in the training process, where
    a compile may win it back and more loader knobs do not. The held-out timm ViT-S (H100,
    2026-11-27): 1.77k images/s beside a loader of 3.48k; its loader climb came first and the
    compile check came with 23 s of the search left, not run; compiled it had run 1.19x."""
    loader = loader_alone(record)
    diagnosis = record.result.diagnosis if record.result is not None else None
    return bool(loader and diagnosis is not None and diagnosis.throughput < AT_LOADER * loader)


def loader_near(record: TrialRecord) -> bool:
    """Whether `record`'s loader alone ran within LOADER_NEAR x its step's rate (a probe to
    trust: never below what the loader fed end to end), whatever its verdict."""
    loader = _believed_loader(record)
    diagnosis = record.result.diagnosis if record.result is not None else None
    return bool(loader and diagnosis is not None and diagnosis.throughput
                and loader <= LOADER_NEAR * diagnosis.throughput)
