"""The `optimizer_impl` values the adapter's optimizer can take, once a trial has built it.

The knob rebuilds a `torch.optim` optimizer with `foreach` or `fused` set; a class without the
flag is left as built (`trial.features.optimizer`). Searched anyway, such a value measures the
default again under another name: on a held-out transformers T5-small with transformers'
Adafactor (H100, 2026-11-27) the fused trial tied the default within noise and was confirmed
the winner, so its best.yaml asked for a fused optimizer that production cannot build. Every
trial reports the values its optimizer takes (`TrialResult.optimizer_impls`); from the first
one on, the others are held back: the sampler holds the knob at "default" when the space has no
other value the optimizer takes, and a config asking for one is not run. Nor is a value that
could not train under a dtype run again under it (`failed_impl`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.knobs import impl_failed
from autotune.contract.result import Status
from autotune.study.store.records import TrialRecord

__all__ = ["failed_impl", "impl_held", "impl_refused", "optimizer_impls"]


def optimizer_impls(records: Sequence[TrialRecord], params: Any = None
                    ) -> tuple[str, ...] | None:
    """The values a trial found the adapter's optimizer takes, of a trial with the adapter knob
    values `params` (a knob may choose the optimizer) when given; None before any such trial
    built it."""
    return next((r.result.optimizer_impls for r in records
                 if r.result is not None and r.result.optimizer_impls is not None
                 and (params is None or (r.config is not None and r.config.params == params))),
                None)


def impl_refused(config: TrainConfig, records: Sequence[TrialRecord]) -> str | None:
    """Why `config` is not run when its optimizer_impl is one the optimizer does not take, or
    one that could not train under its amp dtype in an earlier trial (`failed_impl`)."""
    impls = optimizer_impls(records, config.params)
    if impls is not None and config.optimizer_impl not in impls:
        return (f"not run: optimizer_impl={config.optimizer_impl} would leave the adapter's "
                f"optimizer as built: it takes {', '.join(impls)} (its class has no such flag, "
                f"or it was built holding state or with a scheduler attached)")
    failed = failed_impl(config, records)
    if failed is None:
        return None
    return (f"not run: optimizer_impl={config.optimizer_impl} under {config.amp_dtype} failed "
            f"in trial {failed.number}: {failed.result.reason if failed.result else ''}")


def failed_impl(config: TrainConfig, records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The trial whose optimizer, rebuilt as `config`'s optimizer_impl under its amp dtype and
    adapter knob values, could not train (`contract.knobs.impl_failed`), else None. The rest of
    the config changes nothing of it: on an H200 a held-out DeepLabV3's SGD under fp16 failed
    fused in an eager trial, and the ladder's next compiled follow-up asked for fused again at
    fp16, another process started for the same error (2026-11-29)."""
    if config.optimizer_impl == "default":
        return None
    marker = impl_failed(config.optimizer_impl)
    return next((r for r in records if r.result is not None and r.config is not None
                 and r.result.status is Status.ERROR and r.result.ran
                 and marker in r.result.reason
                 and r.config.optimizer_impl == config.optimizer_impl
                 and r.config.amp_dtype == config.amp_dtype
                 and r.config.params == config.params), None)


def impl_held(records: Sequence[TrialRecord], values: Callable[[str], Sequence[Any]]
              ) -> dict[str, Any]:
    """{"optimizer_impl": "default"} once no value of the space but the default is taken (by
    the first trial's optimizer). A space value taken beside one not taken is not held: the
    sampler may propose the one not taken, which `impl_refused` refuses unrun. Nor is it held
    for an adapter with knobs: one of them may choose the optimizer, and what the first trial's
    took says nothing of another's (`impl_refused` still refuses, per knob values)."""
    impls = optimizer_impls(records)
    if impls is None or any(v in impls for v in values("optimizer_impl") if v != "default"):
        return {}
    if any(r.config is not None and r.config.params for r in records):
        return {}
    return {"optimizer_impl": "default"}
