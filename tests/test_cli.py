"""The command line as a real subprocess: usage errors, broken adapters, OOM trials, a whole study."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from broken_adapters import BROKEN
from helpers import TEST_ADAPTERS, csv_rows, run_autotune
from optuna.trial import TrialState

from autotune import Status, TrainConfig, load_adapter, load_config
from autotune.contract.allocator import HEAP_ENV
from autotune.study.store.records import read_records
from autotune.study.store.study_attrs import read_info

pytestmark = pytest.mark.slow  # every test starts `python -m autotune` (seconds of imports)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The CPU space without compile (a compile trial takes 10-30 s on two cores;
# tests/study/execution/test_runner.py covers compile) and without the DataLoader workers' fork
# storms on a small machine.
QUICK_SPACE = """\
num_workers: {low: 0, high: 1}
batch_size: {factors: [1, 2, 4]}
amp_dtype: {choices: [fp32, bf16]}
"""


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


def load(out: Path, study_name: str) -> optuna.Study:
    storage = f"sqlite:///{(out / 'study.db').resolve()}"
    return optuna.load_study(study_name=study_name, storage=storage)


# -- usage errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "usage: autotune"),
        (["search"], "--adapter"),
        (["search", "--adapter", "adapters/mlp.py", "--trials", "0"], "--trials"),
        (["search", "--adapter", "adapters/mlp.py", "--trials", "many"], "--trials"),
        (["search", "--adapter", "adapters/mlp.py", "--device", "tpu"], "--device"),
        (["search", "--adapter", "adapters/mlp.py", "--measure-seconds", "-1"], "--measure-seconds"),
        (["frobnicate"], "invalid choice"),
        (["show"], "out"),
    ],
    ids=["no-command", "search-without-adapter", "zero-trials", "trials-not-int", "bad-device",
         "negative-measure-seconds", "unknown-command", "show-without-folder"],
)
def test_usage_errors_exit_1_with_help(args: list[str], expected: str) -> None:
    proc = run_autotune(*args)
    assert proc.returncode == 1, failure(proc)
    assert "usage:" in proc.stderr
    assert expected in proc.stderr


def test_a_usage_error_shows_the_usage_line_not_the_whole_help() -> None:
    proc = run_autotune("search", "--adapter", "adapters/mlp.py", "--trials", "0")
    assert proc.returncode == 1
    assert proc.stderr.startswith("usage: autotune search")
    assert "options:" not in proc.stderr and "--confirm-repeats CONFIRM_REPEATS " not in \
        proc.stderr.split("error:")[1]
    assert "autotune search: error: argument --trials: must be greater than 0" in proc.stderr
    assert "autotune search --help" in proc.stderr


@pytest.mark.parametrize(("flag", "message"), [
    (("--confirm", "-1"), "--confirm -1: must be 0 (no confirmation) or more"),
    (("--tolerance", "2"), "--tolerance 2.0: must be a fraction below 1"),
    (("--heartbeat-interval", "10", "--grace-period", "5"), "must be longer than"),
], ids=["confirm", "tolerance", "grace-period"])
def test_a_bad_flag_is_reported_before_the_adapter_is_loaded(
    tmp_path: Path, flag: tuple[str, ...], message: str
) -> None:
    # The adapter does not exist: were it loaded first, its error would be the one reported.
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", tmp_path / "missing.py", "--device", "cpu",
                        "--out", out, *flag)
    assert proc.returncode == 1, failure(proc)
    assert proc.stderr.startswith("usage: autotune search")
    assert message in proc.stderr and "autotune search --help" in proc.stderr
    assert "adapter file not found" not in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_version() -> None:
    from autotune import __version__

    proc = run_autotune("--version")
    assert proc.returncode == 0, failure(proc)
    assert proc.stdout.strip() == f"autotune {__version__}"


def test_search_help_lists_every_builtin_space() -> None:
    from autotune.study.space.file import builtin_spaces

    proc = run_autotune("search", "--help")
    text = " ".join(proc.stdout.split())
    assert {"cpu", "default", "full"} <= set(builtin_spaces())
    assert f"a built-in name ({', '.join(builtin_spaces())})" in text


def test_lab_help_describes_its_five_rows() -> None:
    proc = run_autotune("lab", "--help")
    text = " ".join(proc.stdout.split())
    assert "five rows" in text and "three-run" not in text
    for row in range(1, 6):
        assert f"({row})" in text


def test_help_exits_0() -> None:
    proc = run_autotune("--help")
    assert proc.returncode == 0
    assert "search" in proc.stdout and "show" in proc.stdout


def test_search_help_lists_its_options() -> None:
    proc = run_autotune("search", "--help")
    assert proc.returncode == 0
    for option in ("--adapter", "--space", "--trials", "--trial-timeout", "--device", "--out",
                   "--storage", "--seed", "--measure-seconds"):
        assert option in proc.stdout


def test_show_of_a_folder_without_a_study(tmp_path: Path) -> None:
    proc = run_autotune("show", tmp_path)
    assert proc.returncode == 1, failure(proc)
    assert str(tmp_path / "study.yaml") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_space_exits_1_naming_the_file_and_key(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("amp_dtype: {choices: [fp32, fp8]}\n")
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", TEST_ADAPTERS / "tiny.py", "--device", "cpu",
                        "--space", space, "--out", out)
    assert proc.returncode == 1, failure(proc)
    assert str(space) in proc.stderr and "amp_dtype" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "trials").exists()


def test_cuda_space_on_cpu_exits_1(tmp_path: Path) -> None:
    proc = run_autotune("search", "--adapter", TEST_ADAPTERS / "tiny.py", "--device", "cpu",
                        "--space", "default", "--out", tmp_path / "out")
    assert proc.returncode == 1, failure(proc)
    assert "default.yaml" in proc.stderr and "CUDA" in proc.stderr


# -- broken adapters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["nonexistent", "syntax-error", "import-error", "no-subclass",
                                  "two-subclasses", "missing-loss"])
def test_broken_adapter_exits_1_naming_the_file(tmp_path: Path, case: str) -> None:
    adapter = tmp_path / f"{case}.py"
    expected = "adapter file not found"
    if case != "nonexistent":
        source, expected = BROKEN[case]
        adapter.write_text(source)
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", adapter, "--device", "cpu", "--trials", "1",
                        "--out", out)
    assert proc.returncode == 1, failure(proc)
    assert str(adapter) in proc.stderr
    assert expected in proc.stderr
    if case in ("syntax-error", "import-error"):
        assert "Traceback" in proc.stderr  # the user's error, with where it happened
    else:
        assert "Traceback" not in proc.stderr
    assert not (out / "trials").exists()
    assert not (out / "study.db").exists()


# -- OOM trials are outcomes, not failures of the study ---------------------------------------------------


def test_oom_trials_are_recorded_and_the_study_finishes(tmp_path: Path) -> None:
    threshold = load_adapter(TEST_ADAPTERS / "oom_above.py").threshold  # type: ignore[attr-defined]
    space = tmp_path / "space.yaml"
    space.write_text("batch_size: {factors: [1, 2, 4, 8]}\n")  # 8, 16, 32, 64: the last two OOM
    out = tmp_path / "out"
    proc = run_autotune(
        "search", "--adapter", "tests/adapters/oom_above.py", "--device", "cpu", "--space", space,
        "--trials", "5", "--out", out, "--measure-seconds", "1",
        "--seed", "0", "--confirm", "0",  # the fresh runs would re-run trials that fit: not the point
        "--no-prune",  # on a loaded machine a trial may be pruned: not the point here
    )
    assert proc.returncode == 0, failure(proc)

    study = load(out, "oom_above")
    trials = [t for t in read_records(study) if t.search]  # confirmation runs are trials too
    constraints = {t.number: t.constraints for t in study.get_trials()}
    assert len(trials) == 5
    too_big = {t.number for t in trials if t.config is not None and t.config.batch_size > threshold}
    assert too_big, "no trial tried a batch above the threshold: the test proves nothing"
    for t in trials:
        assert t.state == TrialState.COMPLETE
        assert t.result is not None
        if t.number in too_big:
            assert t.status is Status.OOM, t.result
            assert constraints[t.number] == {"usable": 1.0}
            assert t.value == 0.0
            assert "OutOfMemoryError" in t.result.reason
        else:
            assert t.status is Status.OK, t.result
            assert constraints[t.number] == {"usable": 0.0}
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["config"]["batch_size"] <= threshold
    assert load_config(out / "best.yaml").batch_size <= threshold
    rows = csv_rows(out / "trials.csv")
    assert {r["status"] for r in rows} == {"ok", "oom"}


# -- the effective batch ----------------------------------------------------------------------------------

# The test adapters' base varies the effective batch; this one keeps the default. (That a
# default search keeps it is checked on the examples' searches, tests/test_examples.py, and on
# the search loop, tests/study/test_search.py.)
KEPT_ADAPTER = f"""\
import sys
import time
sys.path.insert(0, {str(TEST_ADAPTERS)!r})
from base import SmallAdapter


class Kept(SmallAdapter):
    vary_global_batch = False
    samples = 4096

    def loss(self, model, batch):
        time.sleep(0.02)  # a step's fixed cost: 8x the batch is 8x the rate, whatever the load
        return super().loss(model, batch)
"""


def test_varying_the_effective_batch_is_asked_for_and_reported(tmp_path: Path) -> None:
    adapter = tmp_path / "kept.py"
    adapter.write_text(KEPT_ADAPTER)
    space = tmp_path / "space.yaml"
    space.write_text("batch_size: {factors: [8]}\n")  # 8 (the baseline's) or 64
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", adapter, "--device", "cpu", "--space", space,
                        "--trials", "2", "--confirm", "0", "--measure-seconds", "1", "--seed", "0",
                        "--out", out, "--vary-global-batch")
    assert proc.returncode == 0, failure(proc)
    assert {t.config.batch_size for t in read_records(load(out, "kept")) if t.config} == {8, 64}
    block = yaml.safe_load((out / "best.yaml").read_text())["effective_batch"]
    # A step costs the same at either size (the sleep): the larger batch wins.
    assert block["value"] == 64 and block["factor"] == 8.0, block
    said = " ".join(proc.stdout.split())
    assert "note: the effective batch (batch_size x grad_accum = 64) is 8x the adapter's 8" in said
    assert "re-tune" in said


# -- what real training code brings -------------------------------------------------------------------------


def test_a_baseline_that_breaks_the_contract_stops_the_search(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", TEST_ADAPTERS / "faults" / "vector_loss.py",
                        "--device", "cpu", "--trials", "4", "--confirm", "0", "--out", out,
                        "--measure-seconds", "1")
    assert proc.returncode == 1, failure(proc)
    assert "breaks the adapter contract" in proc.stderr
    assert "adapter.loss must return a scalar tensor" in proc.stderr
    assert f"log: {out / 'trials' / '0' / 'log.txt'}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [p.name for p in (out / "trials").iterdir()] == ["0"]  # not 4 identical failures
    assert "scalar tensor" in csv_rows(out / "trials.csv")[0]["reason"]


def test_a_dataset_of_2_to_the_31_samples_is_measured_within_seconds(tmp_path: Path) -> None:
    # Nothing proportional to the dataset's length at the loader's start: PyTorch's
    # RandomSampler would first draw randperm(2^31) (16 GiB, about a minute).
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", TEST_ADAPTERS / "huge.py", "--device", "cpu",
                        "--trials", "1", "--confirm", "0", "--out", out,
                        "--measure-seconds", "1")
    assert proc.returncode == 0, failure(proc)
    events = [json.loads(line) for line in
              (out / "trials" / "0" / "events.jsonl").read_text().splitlines()]
    entered = {e["phase"]: e["time"] for e in events if e["event"] == "phase"}
    # From building the dataset and its loader to the first timed window.
    assert entered["windows"] - entered["dataset"] < 5.0, entered
    assert any(e["event"] == "window" for e in events)


# -- a whole study on the CPU ------------------------------------------------------------------------------


def search_mlp(out: Path, space: Path, trials: int) -> subprocess.CompletedProcess[str]:
    return run_autotune(
        "search", "--adapter", "adapters/mlp.py", "--trials", str(trials), "--device", "cpu",
        "--out", out, "--measure-seconds", "2", "--confirm-measure-seconds", "2", "--seed", "0",
        # 2 leaders, a clear lead after 1 run each (up to 3 when tied): 28 s where the default
        # 2 runs took 35 and 3 leaders 85; the rerun 53 s where it took 71 (2-CPU VM)
        "--confirm", "2", "--confirm-repeats", "1", "--space", space,
    )


@pytest.fixture(scope="module")
def mlp_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """One 4-trial study of the example adapter: (out folder, space file, the search's process)."""
    root = tmp_path_factory.mktemp("mlp")
    space = root / "quick.yaml"
    space.write_text(QUICK_SPACE)
    out = root / "out"
    return out, space, search_mlp(out, space, trials=4)


def test_search_writes_every_output(mlp_study: tuple[Path, Path, Any]) -> None:
    out, _, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    for name in ("best.yaml", "trials.csv", "throughput.png", "study.yaml", "study.db"):
        assert (out / name).is_file(), name
    assert (out / "throughput.png").read_bytes()[:8] == PNG_SIGNATURE
    assert yaml.safe_load((out / "study.yaml").read_text()) == {
        "study_name": "mlp", "storage": f"sqlite:///{(out / 'study.db').resolve()}",
    }
    rows = [r for r in csv_rows(out / "trials.csv") if r["role"] not in ("confirm", "winner")]
    measured = [r for r in rows if "not re-run" not in r["reason"]]
    assert measured
    for r in measured:
        trial_dir = out / "trials" / r["number"]
        assert (trial_dir / "log.txt").is_file(), trial_dir
        assert (trial_dir / "request.json").is_file(), trial_dir
        assert (trial_dir / "result.json").is_file(), trial_dir


def test_piped_output_is_plain_unwrapped_lines_and_ends_with_the_table(
        mlp_study: tuple[Path, Path, Any]) -> None:
    out, _, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    lines = proc.stdout.splitlines()
    # rich wrapped this at 80 columns mid-phrase when piped.
    assert lines[0] == ("autotune search adapter=adapters/mlp.py device=cpu study='mlp' "
                        "(0 trial(s) done before)")
    assert "\x1b[" not in proc.stdout
    table = next(i for i, line in enumerate(lines) if "mlp: top" in line)
    assert any(line.startswith("best: trial #") for line in lines[:table])
    assert lines[-1] == f"wrote {out}/best.yaml, {out}/trials.csv, {out}/throughput.png"


def test_best_yaml_round_trips_and_beats_the_baseline(mlp_study: tuple[Path, Path, Any]) -> None:
    out, _, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    doc = yaml.safe_load((out / "best.yaml").read_text())
    tuned = load_config(out / "best.yaml")
    assert tuned.config == TrainConfig(**doc["config"])
    assert tuned.device == doc["provenance"]["device_kind"] == "cpu"
    assert doc["env"] == {"PYTORCH_CUDA_ALLOC_CONF": tuned.alloc_conf, **HEAP_ENV}  # a CPU's
    assert doc["throughput"]["unit"] == doc["baseline"]["unit"] == "samples/s"
    assert doc["throughput"]["value"] >= doc["baseline"]["value"] > 0
    assert doc["provenance"]["torch"] and doc["provenance"]["cpu_count"]


def test_study_holds_every_trial(mlp_study: tuple[Path, Path, Any]) -> None:
    out, _, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    study = load(out, "mlp")
    # A follow-up the ladder queued may still be waiting when the trial count is reached.
    trials = [t for t in read_records(study) if t.state != TrialState.WAITING and t.search]
    searched = [r for r in csv_rows(out / "trials.csv") if r["role"] not in ("confirm", "winner")]
    assert len(trials) == len(searched) == 4
    # Finished: measured to the end, or pruned (clearly slower than the best) after 2 windows.
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert [t.number for t in trials if t.baseline] == [0]
    assert trials[0].config == TrainConfig(batch_size=32)
    info = read_info(study)
    assert info is not None and info.unit == "samples" and info.device == "cpu"


def test_show_prints_the_table(mlp_study: tuple[Path, Path, Any]) -> None:
    out, _, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    shown = run_autotune("show", out)
    assert shown.returncode == 0, failure(shown)
    assert "mlp: top" in shown.stdout
    assert "samples/s" in shown.stdout
    assert "(base)" in shown.stdout
    assert "bs=32 fp32" in shown.stdout  # the baseline's config


def test_rerun_continues_the_same_study(mlp_study: tuple[Path, Path, Any], tmp_path: Path) -> None:
    first_out, space, proc = mlp_study
    assert proc.returncode == 0, failure(proc)
    out = tmp_path / "out"
    shutil.copytree(first_out, out)  # leave the shared study as the other tests expect it
    resumed = search_mlp(out, space, trials=6)
    assert resumed.returncode == 0, failure(resumed)
    trials = [t for t in read_records(load(out, "mlp")) if t.state != TrialState.WAITING
              and t.search]
    assert len(trials) == 6
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert [t.number for t in trials if t.baseline] == [0]
    rows = csv_rows(out / "trials.csv")
    assert len([r for r in rows if r["role"] not in ("confirm", "winner")]) == 6
    # Each run confirmed its leaders; the latest winner is the one marked.
    assert [r["winner"] for r in rows if r["role"] == "winner"] == ["False", "True"]
    assert "(4 trial(s) done before)" in " ".join(resumed.stdout.split())


# -- apply -------------------------------------------------------------------------------------------------


def test_apply_sets_the_allocator_environment(tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump({"config": TrainConfig(
        batch_size=8, expandable_segments=True, max_split_size_mb=256).to_dict()}))
    proc = run_autotune("apply", best, "--", sys.executable, "-c",
                        "import os; print(os.environ['PYTORCH_CUDA_ALLOC_CONF'])")
    assert proc.returncode == 0, failure(proc)
    assert proc.stdout.strip() == "expandable_segments:True,max_split_size_mb:256"


def test_apply_of_a_cpu_search_sets_the_heap_thresholds(tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump({"config": TrainConfig(batch_size=8).to_dict(),
                                    "provenance": {"device_kind": "cpu"}}))
    proc = run_autotune("apply", best, "--", sys.executable, "-c",
                        "import os; print(os.environ['MALLOC_TRIM_THRESHOLD_'])")
    assert proc.returncode == 0, failure(proc)
    assert proc.stdout.strip() == HEAP_ENV["MALLOC_TRIM_THRESHOLD_"]


def test_apply_bad_config_exits_1(tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    best.write_text("config: {batch_size: 8, workers: 2}\n")
    proc = run_autotune("apply", best, "--", sys.executable, "-c", "print('ran')")
    assert proc.returncode == 1, failure(proc)
    assert str(best) in proc.stderr and "workers" in proc.stderr
    assert "ran" not in proc.stdout


# -- export ------------------------------------------------------------------------------------------------


def test_export_prints_arguments_for_each_target(tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump({
        "config": TrainConfig(batch_size=16, grad_accum=2, num_workers=2, prefetch_factor=4,
                              amp_dtype="bf16", expandable_segments=True).to_dict(),
        "provenance": {"device_kind": "cuda"}}))
    hf = run_autotune("export", best, "--to", "hf")
    assert hf.returncode == 0, failure(hf)
    args = yaml.safe_load(hf.stdout)["training_arguments"]
    assert args["per_device_train_batch_size"] == 16 and args["bf16"] is True
    lightning = run_autotune("export", best, "--to", "lightning", "--format", "json")
    assert lightning.returncode == 0, failure(lightning)
    assert json.loads(lightning.stdout)["trainer"]["precision"] == "bf16-mixed"
    env = run_autotune("export", best, "--to", "env")
    assert env.returncode == 0, failure(env)
    assert "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in env.stdout.splitlines()


def test_export_errors_exit_1(tmp_path: Path) -> None:
    proc = run_autotune("export", tmp_path / "missing.yaml", "--to", "hf")
    assert proc.returncode == 1, failure(proc)
    assert "missing.yaml" in proc.stderr and "Traceback" not in proc.stderr
    usage = run_autotune("export", tmp_path / "missing.yaml")
    assert usage.returncode == 1 and "--to" in usage.stderr
