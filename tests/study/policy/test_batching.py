"""A loader that makes its own batches (a bucketing batch_sampler, a fixed batch in make_loader)
is seen from what its batches held at two batch sizes: batch_size is then held at the adapter's,
by the sampler and the ladder, and best.yaml says why (a held-out bucketing loader's search
tried batch sizes that all measured the same loader, 2-CPU VM, 2026-11-26)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import fake_search
from optuna.trial import TrialState

from autotune import Adapter, Status, TrainConfig, TrialResult
from autotune.study.policy.batching import (batch_held, loader_on_device, loader_sets_batch,
                                             on_device_note, unbatched_note)
from autotune.study.policy.sampler import held
from autotune.study.store.records import TrialRecord, read_records

SPACE = {"batch_size": {"choices": [8, 16, 32, 64]}, "num_workers": {"low": 0, "high": 4}}


def record(number: int, batch: int, items: float | None, numel: float | None = None, *,
           role: str = "", params: dict[str, Any] | None = None) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=100.0, role=role,
                       config=TrainConfig(batch_size=batch, params=params or {}),
                       result=TrialResult(status=Status.OK, throughput=100.0,
                                          batch_items=items, batch_numel=numel))


def test_batches_that_held_as_much_at_twice_the_batch_size_say_the_loader_makes_them() -> None:
    made = [record(0, 8, 250.0, 2000.0, role="baseline"), record(1, 64, 262.0, 2100.0)]
    pair = loader_sets_batch(made)
    assert pair is not None and [r.number for r in pair] == [0, 1]
    assert batch_held(made) == 8
    note = unbatched_note(pair, "tokens")
    assert "trials 0 and 1 at batch_size 8 and 64 pulled 250 and 262 tokens a batch" in note
    assert "held at the adapter's" in note


def test_a_loader_that_honours_batch_size_is_not_taken_for_one_that_makes_its_own() -> None:
    assert loader_sets_batch([record(0, 8, 8.0, 72.0), record(1, 64, 64.0, 576.0)]) is None
    # Under twice the batch: too close to tell a loader's batches from noise.
    assert loader_sets_batch([record(0, 32, 32.0), record(1, 48, 32.0)]) is None
    # Other adapter knobs may build another loader.
    assert loader_sets_batch([record(0, 8, 8.0, params={"bucket": 1}),
                              record(1, 64, 8.0, params={"bucket": 2})]) is None
    # Not counted (a trial from before the field): nothing to go by.
    assert loader_sets_batch([record(0, 8, None), record(1, 64, None)]) is None


def test_a_count_that_does_not_follow_the_batch_holds_it_too() -> None:
    # A held-out time-major batch (T, B, F), items() left to its default: T = 40 rows counted at
    # batch 64 and 512 alike, batch 512 ranked 0.1x where it ran 1.07x in sequences (2-CPU VM,
    # 2026-11-28). The tensors grew: the loader honoured the batch, the count did not.
    ran = [record(0, 64, 40.0, 40 * 64 * 16.0, role="baseline"), record(1, 512, 40.0, 40 * 512 * 16.0)]
    pair = loader_sets_batch(ran)
    assert pair is not None and batch_held(ran) == 64
    note = unbatched_note(pair, "sequences")
    assert note.startswith("the adapter's count of sequences does not follow the batch size: "
                           "trials 0 and 1 at batch_size 64 and 512 counted 40 and 40 sequences")
    assert "define items(self, batch)" in note
    # items() counting one per batch: the same.
    assert loader_sets_batch([record(0, 8, 1.0, 72.0), record(1, 64, 1.0, 576.0)]) is not None


def test_batches_without_tensors_go_by_their_items() -> None:
    # Strings tokenized in loss(): no tensor elements to count.
    assert loader_sets_batch([record(0, 8, 12.0), record(1, 64, 12.5)]) is not None


def test_the_sampler_holds_the_adapters_batch_where_the_space_varies_it() -> None:
    made = [record(0, 8, 250.0, role="baseline"), record(1, 64, 250.0)]
    batches = {"batch_size": (8, 16, 32, 64), "compile": ("none",),
               "memory_format": ("contiguous",), "cudnn_benchmark": (False,)}
    assert held(made, lambda k: batches.get(k, ())) == {"batch_size": 8}
    assert held(made[:1], lambda k: batches.get(k, ())) == {}


def script(*, honours: bool) -> Any:
    def run(call: int, request: Any) -> TrialResult:
        c = request.config
        items = float(c.batch_size) if honours else 24.0
        # A larger batch reads a little faster either way: the search would follow it.
        rate = 100.0 * (1 + c.num_workers / 8) * (1 + c.batch_size / 640)
        return TrialResult(status=Status.OK, throughput=rate, batch_items=items,
                           batch_numel=items * 9)
    return run


def test_a_search_stops_searching_batch_size_once_the_loader_is_seen_to_make_its_batches(
        tmp_path: Path) -> None:
    class Bucketing(Adapter):
        batch_size = 8
        vary_global_batch = True

    for folder in ("own", "honours"):
        (tmp_path / folder).mkdir()

    requests, study = fake_search(tmp_path / "own", SPACE, Bucketing, script(honours=False),
                                  trials=14)
    batches = [q.config.batch_size for q in requests]
    first = next(i for i, b in enumerate(batches) if b >= 16)  # the evidence's other trial
    assert len(batches) - first >= 4  # the search went on after it
    assert set(batches[first + 1:]) == {8}
    # The same search with a loader that honours batch_size keeps searching it.
    requests, _ = fake_search(tmp_path / "honours", SPACE, Bucketing, script(honours=True),
                              trials=14)
    batches = [q.config.batch_size for q in requests]
    first = next(i for i, b in enumerate(batches) if b >= 16)
    assert set(batches[first + 1:]) - {8}



def test_a_start_moved_to_the_adapters_batch_is_one_the_space_holds() -> None:
    # Checkpointing searched only at large batches: a start at 64 with it on, moved to the
    # adapter's batch of 8, drops it, as the space would (the space's own projection), rather
    # than carrying a value the space cannot propose there.
    from types import SimpleNamespace

    from autotune.study.parallel import SlotLoop
    from autotune.study.space.file import parse_space

    class Bucketing(Adapter):
        batch_size = 8
        vary_global_batch = True

    raw = {**SPACE, "checkpoint": {"choices": [0.0, 1.0], "when": "batch_size >= 32"}}
    space = parse_space(raw, source="s.yaml", adapter=Bucketing, device_type="cuda", cpus=16)
    made = [record(0, 8, 250.0, role="baseline"), record(1, 64, 250.0)]
    loop = SimpleNamespace(space=space)
    start = TrainConfig(batch_size=64, num_workers=2, checkpoint=1.0)
    assert space.holds(start)
    moved = SlotLoop.at_held_batch(loop, start, made)  # type: ignore[arg-type]
    assert (moved.batch_size, moved.checkpoint, moved.num_workers) == (8, 0.0, 2)
    assert space.holds(moved)
    assert SlotLoop.at_held_batch(loop, start, made[:1]) == start  # type: ignore[arg-type]


LOADER_SPACE = {"num_workers": {"low": 0, "high": "cores"},
                "prefetch_factor": {"choices": [2, 4]},
                "pin_memory": {"choices": [False, True]},
                "persistent_workers": {"choices": [False, True]},
                "amp_dtype": {"choices": ["fp32", "bf16"]}}


def on_cuda(call: int, request: Any) -> TrialResult:
    """A dataset of CUDA tensors: a forked worker cannot read them, pinning refuses them."""
    c = request.config
    if c.num_workers > 0:
        return TrialResult(status=Status.ERROR, reason="RuntimeError: Cannot re-initialize "
                           "CUDA in forked subprocess")
    if c.pin_memory:
        return TrialResult(status=Status.ERROR, reason="RuntimeError: cannot pin "
                           "'torch.cuda.FloatTensor' only dense CPU tensors can be pinned")
    return TrialResult(status=Status.OK, throughput=200.0 if c.amp_dtype == "bf16" else 100.0,
                       batch_device="cuda")


def test_batches_on_the_device_hold_the_loader_knobs_that_cannot_serve_them(
        tmp_path: Path) -> None:
    # A dataset of tensors already on the GPU (a speed run's in-memory CIFAR): every config
    # with workers or pinning failed, the recipe's and the eager dtype trials' at its workers
    # too. Once the baseline shows where the batches are, no trial asks for either.
    class Resident(Adapter):
        batch_size = 8

    requests, study = fake_search(tmp_path, LOADER_SPACE, Resident, on_cuda, trials=10)
    assert requests[0].config.num_workers == 0  # the baseline: PyTorch's defaults
    assert [(q.config.num_workers, q.config.pin_memory) for q in requests[1:]] == \
        [(0, False)] * (len(requests) - 1)
    assert any(q.config.amp_dtype == "bf16" for q in requests)
    device = loader_on_device(read_records(study))
    assert device == "cuda" and "held at 0 and false" in on_device_note(device)
    # A space whose num_workers has no 0 left nothing to hold: the note says so, and the fix.
    assert "add 0 to num_workers" in on_device_note(device, (2, 4))
    assert "held at 0" not in on_device_note(device, (2, 4))


def test_batches_in_host_memory_hold_nothing() -> None:
    made = [record(0, 8, 250.0, role="baseline")]
    assert loader_on_device(made) is None
    # An adapter knob choosing where the dataset lives: once a config that ran ok had its
    # batches in host memory, workers may serve it, and nothing is held.
    on_gpu = TrialRecord(number=1, state=TrialState.COMPLETE, value=100.0, role="",
                         config=TrainConfig(batch_size=8, params={"where": "gpu"}),
                         result=TrialResult(status=Status.OK, throughput=100.0,
                                            batch_device="cuda"))
    failed = TrialRecord(number=2, state=TrialState.COMPLETE, value=0.0, role="",
                         config=TrainConfig(batch_size=8, num_workers=2),
                         result=TrialResult(status=Status.ERROR, reason="forked"))
    assert loader_on_device([on_gpu, failed]) == "cuda"  # a failed trial holds no batch
    assert loader_on_device([on_gpu, failed, *made]) is None
    assert held(made, lambda k: {"num_workers": (0, 1, 2), "pin_memory": (False, True)}.get(k, ())
                ) == {}


def test_a_start_moved_off_its_workers_gives_back_the_threads_set_beside_them() -> None:
    # A diagnosed recipe for an input-bound baseline sets intra-op threads on the cores its
    # workers leave; with the batches on the device its workers go, and so do those threads.
    from types import SimpleNamespace

    from autotune.study.parallel import SlotLoop
    from autotune.study.space.file import parse_space

    class Resident(Adapter):
        batch_size = 8

    raw = {**LOADER_SPACE, "intra_op_threads": {"choices": [None, 1, 2, 4, 8]}}
    space = parse_space(raw, source="s.yaml", adapter=Resident, device_type="cuda", cpus=16)
    on_gpu = [TrialRecord(number=0, state=TrialState.COMPLETE, value=100.0, role="baseline",
                          config=TrainConfig(batch_size=8),
                          result=TrialResult(status=Status.OK, throughput=100.0,
                                             batch_device="cuda"))]
    loop = SimpleNamespace(space=space)
    start = TrainConfig(batch_size=8, num_workers=8, prefetch_factor=2, pin_memory=True,
                        intra_op_threads=8)
    assert space.holds(start)
    moved = SlotLoop.at_held_batch(loop, start, on_gpu)  # type: ignore[arg-type]
    assert (moved.num_workers, moved.pin_memory, moved.intra_op_threads) == (0, False, None)
    # Threads a start chose without workers are its own.
    own = TrainConfig(batch_size=8, intra_op_threads=4)
    assert SlotLoop.at_held_batch(loop, own, on_gpu).intra_op_threads == 4  # type: ignore[arg-type]
