"""The ladder of follow-ups: a guided trial that becomes the best supersedes the follow-ups of
the configs it beat (their climbs and checks), never the urgent ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import fake_search

from autotune import Adapter, Diagnosis, Status, TrainConfig, TrialResult, Verdict
from autotune.study.policy.ladder import Ladder
from autotune.study.store.records import read_records

BEST = TrainConfig(batch_size=64, amp_dtype="bf16", compile="default")


def test_a_new_best_drops_the_follow_ups_of_the_configs_it_beat_but_the_urgent() -> None:
    ladder = Ladder()
    checks = [("follow: pin", BEST.replace(pin_memory=True)),
              ("follow: eager", BEST.replace(compile="none"))]
    graphs = ("follow: graphs", BEST.replace(compile="reduce-overhead"))
    others = [("eager: fp16", BEST.replace(amp_dtype="fp16", compile="none")),
              ("recipe", BEST.replace(num_workers=2, prefetch_factor=4)),
              ("explore: x", BEST.replace(batch_size=32))]
    ladder.add(checks + others, new_best=True)
    ladder.add([graphs], new_best=True, urgent=True)
    ladder.supersede()
    assert ladder.pending == [graphs] + others


# GPT-2 small on an H100 (2026-11-26), as ratios: eager bf16 372k tokens/s, compiled 1.13x,
# the loss compiled with the model 1.16x more; tf32 and fp32 do not fit at batch 64.
def gpt_like(call: int, request: Any) -> TrialResult:
    c = request.config
    if c.batch_size == 64 and c.amp_dtype in ("fp32", "tf32"):
        return TrialResult(status=Status.OOM, reason="out of memory")
    rate = {"fp32": 50e3, "tf32": 150e3, "bf16": 372e3, "fp16": 368e3}[c.amp_dtype]
    rate *= c.batch_size / 64
    if c.compile != "none":
        rate *= 1.13 * (1.16 if c.compile_scope == "loss" else 1.0)
    return TrialResult(status=Status.OK, throughput=rate,
                       diagnosis=Diagnosis(verdict=Verdict.COMPUTE, suggestion="",
                                           throughput=rate, loader_rate=1e8, compute_rate=rate,
                                           data_wait_fraction=0.0, gpu_busy_fraction=0.97))


class Gpt(Adapter):
    unit = "tokens"
    batch_size = 8
    global_batch_size = 64


def test_after_the_loss_scope_wins_the_old_compiled_best_is_not_checked_again(
        tmp_path: Path) -> None:
    """On the H100 the scope check won at trial 7 and trials 15-18 then checked the beaten
    model-scope config's workers, pinning and allocator one by one."""
    raw = {"num_workers": {"choices": [0, 2, 8]}, "prefetch_factor": {"choices": [4]},
           "pin_memory": {"choices": [False, True]}, "persistent_workers": {"choices": [True]},
           "batch_size": {"factors": [1, 2, 4, 8]},
           "amp_dtype": {"choices": ["fp32", "tf32", "bf16", "fp16"]},
           "compile": {"choices": ["none", "default"]},
           "compile_scope": {"choices": ["model", "loss"]},
           "expandable_segments": {"choices": [False, True]}}
    _, study = fake_search(tmp_path, raw, Gpt, gpt_like, trials=16)
    records = sorted(read_records(study), key=lambda r: r.number)
    scoped = next(r.number for r in records if r.config is not None
                  and r.config.compile_scope == "loss")
    assert study.best_trial.params.get("compile_scope") == "loss"
    stale = [r.config.describe() for r in records if r.number > scoped and r.config is not None
             and r.role.startswith("follow: ") and r.config.compile != "none"
             and r.config.compile_scope == "model"]
    assert stale == []
