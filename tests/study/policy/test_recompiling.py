"""After a compile that kept recompiling, the search pays for no other compile of the same
shapes: compiled guided starts are passed over, the sampler proposes eager configs, and a
compiled proposal is refused unrun, as infeasible. An adapter's own knobs (padding) may change
the shapes: a compile with other values still runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import compute_bound_by_dtype, fake_search

from autotune import Adapter, Status, TrialResult
from autotune.contract.result import RECOMPILING
from autotune.study.store.records import read_records

RAW = {"amp_dtype": {"choices": ["fp32", "tf32", "bf16"]},
       "num_workers": {"low": 0, "high": 4},
       "compile": {"choices": ["none", "default", "reduce-overhead"]}}


def detection(call: int, request: Any) -> TrialResult:
    """Eager rates by dtype; any compile of unpadded shapes keeps recompiling."""
    config = request.config
    if config.compile != "none" and config.params.get("pad") is None:
        return TrialResult(status=Status.ERROR, reason=f"{RECOMPILING}: recompiled in 3 of its "
                           "first 7 warm-up steps (40 s compiling after the first step)",
                           recompiles=3, recompile_seconds=40.0, shapes_vary=True)
    return compute_bound_by_dtype(config)


def test_after_a_compile_that_kept_recompiling_no_other_compile_runs(tmp_path: Path) -> None:
    class Detection(Adapter):
        batch_size = 8

    requests, study = fake_search(tmp_path, RAW, Detection, detection, trials=14)
    compiled = [q for q in requests if q.config.compile != "none"]
    assert len(compiled) == 1, [q.config for q in compiled]
    records = [r for r in read_records(study) if r.number > compiled[0].number]
    assert records, "the search went on after the storm"
    refused = [r for r in records if r.config is not None and r.config.compile != "none"]
    # The sampler proposes eager configs: nothing compiled is even refused after the storm.
    assert all(r.status is Status.ERROR and r.result is not None and not r.result.ran
               and f"trial {compiled[0].number}" in r.result.reason for r in refused)
    assert len(refused) <= 1


def test_a_padding_knob_of_the_adapters_may_still_compile(tmp_path: Path) -> None:
    class Padded(Adapter):
        batch_size = 8
        knobs = {"pad": {"choices": [None, 64]}}

    requests, study = fake_search(tmp_path, RAW, Padded, detection, trials=16)
    ran = [(q.config.compile != "none", q.config.params["pad"]) for q in requests]
    assert (True, None) in ran and (True, 64) in ran, ran
    assert ran.count((True, None)) == 1
