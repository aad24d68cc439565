"""`autotune profile` on the CPU: one real profile of an input-bound test adapter (in this
process, shared by the module), read back as a user would (the trace, breakdown.json and .md),
then the command itself as a subprocess comparing two configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import TEST_ADAPTERS, run_autotune

from autotune import MeasureSettings, TrainConfig
from autotune.cli import main
from autotune.contract.profile import Breakdown, ProfileRequest, ProfileSettings
from autotune.contract.request import TrialRequest
from autotune.outputs.profile import to_markdown
from autotune.trial.breakdown import recorded_name
from autotune.trial.compose import REGIONS, no_region
from autotune.trial.profile import TRACE, run_profile

SLOW_LOADER = TEST_ADAPTERS / "slow_loader.py"  # 8 samples x 4 ms of sleep a step
SAMPLE_SECONDS = 0.004  # slow_loader.SAMPLE_SECONDS
QUICK = MeasureSettings(window_seconds=0.1, budget_seconds=0.3, min_windows=2)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Breakdown]:
    out = tmp_path_factory.mktemp("profile")
    request = ProfileRequest(
        trial=TrialRequest(adapter=str(SLOW_LOADER), config=TrainConfig(batch_size=8),
                           device="cpu", measure=QUICK, check_env=False),
        settings=ProfileSettings(wait=0, warmup=1, active=3, tensorboard=True))
    return out, run_profile(request, out)


def test_the_trace_is_chrome_json_with_the_regions_and_the_steps(
        profiled: tuple[Path, Breakdown]) -> None:
    out, _ = profiled
    events = json.loads((out / TRACE).read_text())["traceEvents"]
    names = {e.get("name", "") for e in events}
    assert {recorded_name(r) for r in REGIONS} <= names
    assert sum(n.startswith("ProfilerStep#") for n in names) == 3  # the active steps only
    assert any(n.startswith("aten::") for n in names)  # the operators inside the regions
    assert list((out / "tensorboard").glob("*.pt.trace.json"))  # --tensorboard's handler


def test_the_shares_sum_to_one_and_the_loaders_sleep_is_in_data_wait(
        profiled: tuple[Path, Breakdown]) -> None:
    _, b = profiled
    assert [r.name for r in b.regions] == [*REGIONS, "other"]
    assert sum(r.host_share for r in b.regions) == pytest.approx(1.0, abs=1e-6)
    assert all(r.host_seconds > 0 for r in b.regions if r.name != "other")
    # The loader sleeps 8 x 4 ms a step: a floor however busy the machine (a share would
    # not be: on the 2-core VM the linear layer's step read 40 ms in one run of six).
    wait = next(r for r in b.regions if r.name == "data wait")
    assert wait.host_seconds >= 8 * SAMPLE_SECONDS
    assert b.step_seconds == pytest.approx(sum(r.host_seconds for r in b.regions), rel=1e-6)
    assert b.steps == 3


def test_the_slowest_operators_are_real_ones_slowest_first(
        profiled: tuple[Path, Breakdown]) -> None:
    _, b = profiled
    ops = [op for op in b.top_ops if op.kind == "cpu"]
    assert 0 < len(ops) <= 10 and len(ops) == len(b.top_ops)  # no kernels on the CPU
    assert [op.self_seconds for op in ops] == sorted((op.self_seconds for op in ops),
                                                     reverse=True)
    assert not any(op.name.startswith(("autotune: ", "ProfilerStep")) for op in ops)


def test_cpu_facts_and_the_diagnosis(profiled: tuple[Path, Breakdown]) -> None:
    _, b = profiled
    assert b.gpu_busy_fraction is None and b.gpu_idle_seconds is None
    assert b.peak_allocated_mb is None and b.peak_rss_mb and b.peak_rss_mb > 0
    assert b.throughput and b.measured_step_seconds and b.data_wait_fraction
    assert b.diagnosis is not None and b.diagnosis.verdict.value == "input-bound"
    assert b.diagnosis_from == "this run"
    assert b.files == (TRACE, "tensorboard")


def test_breakdown_json_round_trips(profiled: tuple[Path, Breakdown], tmp_path: Path) -> None:
    _, b = profiled
    b.save(tmp_path / "breakdown.json")
    assert Breakdown.load(tmp_path / "breakdown.json") == b


def test_breakdown_md_says_n_a_for_the_gpu_and_compares_side_by_side(
        profiled: tuple[Path, Breakdown]) -> None:
    _, b = profiled
    one = to_markdown([("PyTorch defaults", b)])
    assert "| GPU busy | n/a (no CUDA) |" in one
    assert "| bound (diagnosis) | input-bound |" in one
    for region in (*REGIONS, "other"):
        assert f"| {region} | " in one
    two = to_markdown([("a.yaml", b), ("b.yaml", b)])
    assert "| region | a.yaml | b.yaml |" in two
    wait = next(line for line in two.splitlines() if line.startswith("| data wait |"))
    assert wait.count("%") == 2  # a cell per config


def test_the_regions_are_no_ops_outside_a_profile() -> None:
    assert no_region("forward") is no_region("backward")  # one shared null context
    with no_region("forward"):
        pass


def test_config_and_compare_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["profile", "--adapter", str(SLOW_LOADER), "--config", "a.yaml",
              "--compare", "a.yaml", "b.yaml"])
    assert exit_.value.code == 1
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_compares_two_configs(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump({"batch_size": 8}))
    # A best.yaml's recorded diagnosis is reported, not measured again.
    b.write_text(yaml.safe_dump({"config": {"batch_size": 16}, "diagnosis": {
        "verdict": "compute-bound", "suggestion": "as recorded", "throughput": 1.0,
        "loader_rate": 2.0, "compute_rate": 1.0, "data_wait_fraction": 0.0,
        "gpu_busy_fraction": None}}))
    out = tmp_path / "out"
    done = run_autotune("profile", "--adapter", TEST_ADAPTERS / "tiny.py", "--device", "cpu",
                        "--compare", a, b, "--out", out, "--steps", "2",
                        "--measure-seconds", "0.3")
    assert done.returncode == 0, done.stderr + done.stdout
    md = (out / "breakdown.md").read_text()
    assert f"| region | {a} | {b} |" in md
    assert "compute-bound** (recorded in best.yaml" in md
    both = json.loads((out / "breakdown.json").read_text())
    assert [Breakdown.from_dict(v).config.batch_size for v in both.values()] == [8, 16]
    for folder in ("a", "b"):
        assert json.loads((out / folder / TRACE).read_text())["traceEvents"]
        assert (out / folder / "breakdown.md").is_file()
    assert "wrote" in done.stdout
