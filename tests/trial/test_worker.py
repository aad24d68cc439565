"""The trial process's entry point, run in this process: one request in, one result out, every
failure a result, and the seconds each phase of the trial took."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import PID_DIR_ENV, TEST_ADAPTERS, recorded_pids

from autotune import HostCpu, MeasureSettings, Status, TrainConfig, TrialResult, load_adapter
from autotune.contract.phases import MEASURED, PHASES
from autotune.contract.request import TrialRequest
from autotune.trial.steps import DIAGNOSIS_RESERVE, REPORT_RESERVE, one_line, settings_for
from autotune.trial.worker import Preloaded, _reason, main, run_trial, serve

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)


def request_for(adapter: Path, config: TrainConfig | None = None, **kw: Any) -> TrialRequest:
    values: dict[str, Any] = {"measure": QUICK, "number": 3, "check_env": False, **kw}
    return TrialRequest(adapter=str(adapter), config=config or TrainConfig(batch_size=8),
                        device="cpu", **values)


def events_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- what the measurement must know ----------------------------------------------------------------


def test_settings_for_fills_in_the_loader_and_accumulation() -> None:
    config = TrainConfig(batch_size=8, grad_accum=4, num_workers=3, prefetch_factor=5)
    settings = settings_for(config, QUICK)
    assert (settings.num_workers, settings.grad_accum, settings.prefetch_batches) == (3, 4, 15)
    assert settings.window_seconds == QUICK.window_seconds  # the rest is the base's
    # PyTorch's default prefetch factor is 2; no workers hold nothing ahead.
    assert settings_for(TrainConfig(batch_size=8, num_workers=2), QUICK).prefetch_batches == 4
    assert settings_for(TrainConfig(batch_size=8), QUICK).prefetch_batches == 0


# -- a whole trial ----------------------------------------------------------------------------------


def test_run_trial_measures_and_records_its_phases(tmp_path: Path, tiny_adapter: Path) -> None:
    events = tmp_path / "events.jsonl"
    before = time.perf_counter()
    result = run_trial(request_for(tiny_adapter, TrainConfig(batch_size=8, checkpoint=1.0)),
                       events)
    wall = time.perf_counter() - before
    assert result.status is Status.OK, result.reason
    assert result.throughput is not None and result.throughput > 0
    assert result.unit == "samples" and result.blocks_checkpointed == 2
    assert result.optimizer_impls == ("default", "foreach", "fused")  # the values SGD takes
    # What a batch held: 8 samples, each 8 features and a label (what batch_size bought).
    assert (result.batch_items, result.batch_numel) == (8, 8 * 8 + 8)
    assert result.epoch_batches == 512 // 8  # the loader's epoch (best.yaml's batch note)
    # The count intra_op_threads null runs (`policy.twins`), read before the trial set any.
    assert result.fingerprint is not None and (result.fingerprint.torch_threads or 0) >= 1
    assert result.windows == len(result.window_throughputs) >= 3
    assert result.rising_windows is not None and result.rising_windows >= 0  # carried over
    assert result.warmup_steps is not None and result.warmup_steps >= QUICK.min_warmup_steps
    assert isinstance(result.settled, bool)
    assert result.fingerprint is not None and result.fingerprint.torch == torch.__version__
    if Path("/proc/stat").is_file():
        assert isinstance(result.host_cpu, HostCpu)
        # What else ran while it was timed, over the windows' own time.
        assert result.noise is not None and result.noise.other_cpu_seconds is not None
        assert 0 < result.noise.seconds <= result.phases["windows"]
        assert result.noise.gpu_others is None  # a CPU trial asks no GPU
    assert result.diagnosis is not None and result.diagnosis_error == ""

    # Seconds per phase, in the order the trial went through them, adding up to its wall time.
    assert list(result.phases) == list(PHASES)
    assert all(seconds >= 0 for seconds in result.phases.values())
    assert sum(result.phases.values()) <= wall
    assert sum(result.phases.values()) == pytest.approx(wall, abs=0.2)
    # Windows are sized by warm-up's step time, so on a loaded machine they can be short.
    assert result.phases["windows"] > 0

    # The same phases stream as events while the trial runs, with the windows in between.
    stream = events_of(events)
    assert [e["phase"] for e in stream if e["event"] == "phase"] == list(PHASES[1:])
    kinds = [e["event"] if e["event"] != "phase" else e["phase"] for e in stream]
    # Built, then the first batch, then warm-up's first step (where compiling happens).
    assert kinds.index("composed") < kinds.index("first_batch") < kinds.index("warmup") \
        < kinds.index("first_step") < kinds.index("windows") < kinds.index("window")
    assert all(isinstance(e["time"], float) for e in stream if e["event"] == "phase")
    assert kinds.count("window") == result.windows
    windows = [e["throughput"] for e in stream if e["event"] == "window"]
    assert tuple(windows) == result.window_throughputs


def test_the_measurement_is_kept_before_the_diagnosis_starts(tmp_path: Path,
                                                               tiny_adapter: Path) -> None:
    # Written as the windows end, so a trial killed while diagnosing keeps them (the runner
    # reads it then); the same measurement as the final result, less the diagnosis.
    result = run_trial(request_for(tiny_adapter), tmp_path / "events.jsonl")
    assert result.diagnosis is not None
    measured = TrialResult.load(tmp_path / MEASURED)
    assert measured.status is Status.OK and measured.diagnosis is None
    assert measured.throughput == result.throughput
    assert measured.window_throughputs == result.window_throughputs
    assert "windows" in measured.phases and "diagnosis" not in measured.phases
    # No diagnosis, nothing to lose: no such file.
    (tmp_path / "b").mkdir()
    run_trial(request_for(tiny_adapter, diagnose=False), tmp_path / "b" / "events.jsonl")
    assert not (tmp_path / "b" / MEASURED).exists()


def test_start_up_before_the_call_counts_as_the_start_phase(tiny_adapter: Path) -> None:
    started = time.perf_counter() - 5.0  # the process began (interpreter, imports) 5 s ago
    result = run_trial(request_for(tiny_adapter, diagnose=False), started=started)
    assert result.status is Status.OK, result.reason
    assert result.phases["start"] >= 5.0
    assert "diagnosis" not in result.phases and result.diagnosis is None


def test_a_trial_slower_than_the_diagnosis_threshold_is_not_diagnosed(tiny_adapter: Path) -> None:
    result = run_trial(request_for(tiny_adapter, diagnose_from=float("inf")))
    assert result.status is Status.OK, result.reason
    assert "diagnosis" not in result.phases and result.diagnosis is None
    reached = run_trial(request_for(tiny_adapter, diagnose_from=1e-9))
    assert "diagnosis" in reached.phases and reached.diagnosis is not None


def test_no_diagnosis_starts_near_the_time_limit(tiny_adapter: Path) -> None:
    # The trial began 100 s ago; its limit is 110 s: 10 s left, less than the reserve.
    began = time.perf_counter() - 100.0
    result = run_trial(request_for(tiny_adapter, time_limit=110.0), started=began)
    assert result.status is Status.OK, result.reason
    assert DIAGNOSIS_RESERVE > 10.0
    assert "diagnosis" not in result.phases and result.diagnosis is None
    roomy = run_trial(request_for(tiny_adapter, time_limit=100.0 + 2 * DIAGNOSIS_RESERVE + 60.0),
                      started=began)
    assert "diagnosis" in roomy.phases and roomy.diagnosis is not None


def test_windows_end_before_the_time_limit(tiny_adapter: Path) -> None:
    # Windows that never agree (tolerance 0) and a budget far past the limit: the trial ends
    # them REPORT_RESERVE before its limit and reports them, where a kill would lose them.
    endless = MeasureSettings(window_seconds=0.02, budget_seconds=1000.0, max_windows=100000,
                              tolerance=1e-12)
    limit = REPORT_RESERVE + 4.0
    began = time.perf_counter()
    result = run_trial(request_for(tiny_adapter, measure=endless, time_limit=limit,
                                   diagnose=False), started=began)
    assert result.status is Status.OK, result.reason
    assert not result.converged and result.windows is not None and result.windows > 3
    assert time.perf_counter() - began < limit


def test_a_failure_is_a_result_with_the_phases_it_reached(
    tmp_path: Path, test_adapters: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_FAULT", "error")
    result = run_trial(request_for(test_adapters / "faulty.py", TrainConfig(batch_size=4)),
                       tmp_path / "events.jsonl")
    assert result.status is Status.ERROR
    # The adapter's own line, which the console shows (the traceback is in the trial's log).
    assert result.reason == "ValueError: bad batch in the user's loss (faulty.py, line 32, in loss)"
    assert result.contract_error == "loss(model, batch)"  # the adapter's own code raised
    # It failed warming up, after the first batch arrived.
    assert list(result.phases) == ["start", "import", "device", "model", "dataset", "first_batch",
                                   "warmup"]
    assert result.fingerprint is not None  # what was learned before the failure is kept
    assert result.blocks_checkpointed == 0
    assert result.throughput is None and result.peak_rss_mb is not None


def test_a_non_finite_loss_is_nan(test_adapters: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_FAULT", "nan")
    result = run_trial(request_for(test_adapters / "faulty.py", TrainConfig(batch_size=4)))
    assert result.status is Status.NAN and "not finite" in result.reason
    assert result.contract_error == ""  # a config's outcome (fp16 overflows), not a contract
    assert "warmup" in result.phases


def test_an_oom_is_oom(tmp_path: Path) -> None:
    result = run_trial(request_for(TEST_ADAPTERS / "oom_above.py", TrainConfig(batch_size=32)))
    assert result.status is Status.OOM
    assert result.reason.startswith("OutOfMemoryError: CUDA out of memory")
    assert result.contract_error == ""  # raised in the adapter's loss, but a smaller batch fits


def test_allocator_settings_that_did_not_arrive_are_an_error(
    tiny_adapter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    config = TrainConfig(batch_size=8, expandable_segments=True)
    result = run_trial(request_for(tiny_adapter, config, check_env=True))
    assert result.status is Status.ERROR
    assert "PYTORCH_CUDA_ALLOC_CONF=''" in result.reason
    assert "expandable_segments:True" in result.reason
    assert list(result.phases) == ["start", "import"]  # nothing was built
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    assert run_trial(request_for(tiny_adapter, config, check_env=True,
                                 diagnose=False)).status is Status.OK


def test_an_adapter_that_does_not_load_is_an_error(tmp_path: Path) -> None:
    result = run_trial(request_for(tmp_path / "missing.py"))
    assert result.status is Status.ERROR
    assert result.reason.startswith("InputError: ") and "adapter file not found" in result.reason
    assert result.contract_error == "the adapter file"


def test_a_preloaded_dataset_is_used(tiny_adapter: Path) -> None:
    # What a fork server built once: the trial uses it instead of calling dataset() again.
    class Counted(torch.utils.data.TensorDataset):
        reads = 0

        def __getitem__(self, i: int) -> Any:
            Counted.reads += 1
            return super().__getitem__(i)

    adapter = load_adapter(tiny_adapter)
    data = Counted(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    preloaded = Preloaded(adapter_path=str(tiny_adapter), adapter_cls=adapter, dataset=data)
    result = run_trial(request_for(tiny_adapter, diagnose=False), preloaded=preloaded)
    assert result.status is Status.OK, result.reason
    assert Counted.reads > 0
    other = Preloaded(adapter_path="another.py", adapter_cls=adapter, dataset=None)
    assert run_trial(request_for(tiny_adapter, diagnose=False),
                     preloaded=other).status is Status.OK  # another adapter's: not used


SAMPLER_ADAPTER = """
import torch, autotune

class Grouped(torch.utils.data.Sampler):
    used = []
    def __init__(self, data):
        self.n = len(data)
    def __iter__(self):
        Grouped.used.append(self.n)
        return iter(range(self.n))
    def __len__(self):
        return self.n

class Kept(autotune.Adapter):
    unit = "samples"
    batch_size = 8
    def dataset(self):
        self._ds = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
        return self._ds
    def loader_args(self):
        return {"sampler": Grouped(self._ds)}
    def model(self):  # before dataset(), as in a fresh process: it must not see self._ds
        assert not hasattr(self, "_ds")
        return torch.nn.Linear(4, 2)
    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)
    def loss(self, model, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)
"""


def test_what_dataset_kept_on_the_adapter_reaches_a_trial_that_reuses_the_dataset(
        tmp_path: Path) -> None:
    # A held-out user's sampler, built in loader_args from the dataset dataset() kept on self
    # (2026-11-28): the load check failed on it, and guarded, every trial ran without it (its
    # dataset came from the fork server, built on another adapter instance).
    from autotune.adapter import load_adapter
    from autotune.contract.params import Built
    from autotune.trial.zygote import _preload

    path = tmp_path / "kept.py"
    path.write_text(SAMPLER_ADAPTER)
    cls = load_adapter(path)  # no dataset() here, so no self._ds: left to the trial
    preloaded, note = _preload(str(path))
    built = preloaded.dataset
    assert note == "" and isinstance(built, Built) and set(built.state) == {"_ds"}
    assert built.state["_ds"] is built.dataset
    result = run_trial(request_for(path, diagnose=False), preloaded=preloaded)
    assert result.status is Status.OK, result.reason
    assert sys.modules[cls.__module__].Grouped.used  # the trial's loader drew from it


def test_real_training_codes_loader_works_unchanged(
    tmp_path: Path, test_adapters: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dict samples, its own collate_fn (a dataclass batch) and worker_init_fn, with a worker.
    monkeypatch.setenv(PID_DIR_ENV, str(tmp_path))
    result = run_trial(request_for(test_adapters / "structured.py",
                                   TrainConfig(batch_size=8, num_workers=1), diagnose=False))
    assert result.status is Status.OK, result.reason
    assert result.throughput is not None and result.contract_error == ""
    assert recorded_pids(tmp_path, "init")  # the adapter's worker_init_fn ran in its worker


@pytest.mark.parametrize(
    ("config", "part"),
    [(TrainConfig(batch_size=8), "loader (dataset, collate_fn, sampler)"),
     (TrainConfig(batch_size=8, num_workers=1), "loader (dataset, collate_fn, sampler)")],
    ids=["in-process", "in-a-worker"],
)
def test_a_collate_error_is_the_adapters(tmp_path: Path, config: TrainConfig, part: str) -> None:
    adapter = tmp_path / "bad_collate.py"
    adapter.write_text(
        f"import sys\nsys.path.insert(0, {str(TEST_ADAPTERS)!r})\nfrom base import SmallAdapter\n\n"
        "def collate(samples):\n    raise ValueError('cannot collate these samples')\n\n"
        "class BadCollate(SmallAdapter):\n"
        "    def loader_args(self):\n        return {'collate_fn': collate}\n")
    result = run_trial(request_for(adapter, config, diagnose=False), tmp_path / "events.jsonl")
    assert result.status is Status.ERROR
    assert "cannot collate these samples" in result.reason
    assert result.contract_error == part
    assert list(result.phases)[-1] == "first_batch"  # where it failed


# -- the process's entry point --------------------------------------------------------------------------


def test_serve_writes_the_result_into_the_trial_folder(
    tmp_path: Path, tiny_adapter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = request_for(tiny_adapter, diagnose=False)
    (tmp_path / "request.json").write_text(json.dumps(request.to_dict()))
    assert serve(tmp_path, started=time.perf_counter() - 1.0) == 0
    result = TrialResult.load(tmp_path / "result.json")
    assert result.status is Status.OK
    assert result.duration_seconds is not None and result.duration_seconds >= 1.0
    assert (tmp_path / "events.jsonl").is_file()
    assert "autotune trial 3: ok" in capsys.readouterr().out


def test_main_needs_one_trial_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["a", "b"]) == 2
    assert "usage: python -m autotune.trial.worker TRIAL_DIR" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (ValueError("bad sample 3"), "ValueError: bad sample 3"),
        (RuntimeError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback:\n"
                      "  File x\nValueError: bad sample 3\n"),
         "RuntimeError: Caught ValueError in DataLoader worker process 0. ... "
         "ValueError: bad sample 3"),
        (KeyError(), "KeyError: "),
        (RuntimeError("x" * 1000), "RuntimeError: " + "x" * 286),
    ],
    ids=["one-line", "worker-exception", "empty", "cut-at-300"],
)
def test_one_line_reasons(exc: BaseException, line: str) -> None:
    assert one_line(exc) == line


def test_where_the_tools_loader_hands_batches_over_is_reported_not_a_make_loaders(
        tmp_path: Path, tiny_adapter: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A make_loader may move to the GPU what its workers made: its batches on the device say
    # nothing about whether workers can read the dataset.
    import autotune.trial.shapes as shapes

    monkeypatch.setattr(shapes, "device_of", lambda batch: "cuda")  # as a CUDA dataset's
    own = tmp_path / "own_loader.py"
    own.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {str(TEST_ADAPTERS)!r})\n"
        "from tiny import TinyAdapter\n"
        "class OwnLoader(TinyAdapter):\n"
        "    def make_loader(self, dataset, **knobs):\n"
        "        return torch.utils.data.DataLoader(dataset, batch_size=knobs['batch_size'],\n"
        "                                           drop_last=True)\n")
    plain = run_trial(request_for(tiny_adapter), tmp_path / "a.jsonl")
    built = run_trial(request_for(own), tmp_path / "b.jsonl")
    assert plain.status is Status.OK and built.status is Status.OK, (plain.reason, built.reason)
    assert (plain.batch_device, built.batch_device) == ("cuda", None)


def _raised_in(path: str, exc: BaseException) -> BaseException:
    """`exc` as raised by a function whose code lives at `path`."""
    code = compile("def get_pw_red_splits(exc):\n    raise exc\n", path, "exec")
    space: dict[str, Any] = {}
    exec(code, space)  # noqa: S102 - a frame with that file name, as torch's own
    try:
        space["get_pw_red_splits"](exc)
    except BaseException as caught:  # noqa: BLE001
        return caught
    raise AssertionError("not raised")


def test_a_failure_inside_torch_compile_says_where_and_drops_torchs_boilerplate() -> None:
    # A held-out speech model's compile on an H200 (2026-11-28): "InductorError: AssertionError:
    # ... Set TORCHDYNAMO_VERBOSE=1 ..." said neither where nor whose.
    inductor = type("InductorError", (RuntimeError,), {})
    exc = _raised_in("/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/tiling_utils.py",
                     inductor("AssertionError: \nSet TORCHDYNAMO_VERBOSE=1 for the internal stack "
                              "trace (please do this especially if you're reporting a bug to "
                              "PyTorch). For even more developer context, set TORCH_LOGS=\"+dynamo\""))
    assert _reason(exc, "adapter.py") == (
        "InductorError: AssertionError: (raised in torch.compile's own code: "
        "torch/_inductor/tiling_utils.py:2 in get_pw_red_splits)")
    elsewhere = _raised_in("/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/functional.py",
                           ValueError("bad shape"))
    assert _reason(elsewhere, "adapter.py") == "ValueError: bad shape"
