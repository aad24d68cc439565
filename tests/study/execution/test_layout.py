"""Where concurrent trials run: GPUs from --gpus, CPU shares that never overlap, clear errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from autotune.contract.errors import InputError
from autotune.contract.host import CPUS_ENV, format_cpus, parse_cpus
from autotune.study.execution.layout import EMULATE_ENV, Layout, Slot, plan_layout, visible_gpus

HOST = list(range(32))


def test_cpu_lists_round_trip() -> None:
    assert format_cpus([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert parse_cpus("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert format_cpus([5]) == "5"
    with pytest.raises(ValueError, match="cpu list"):
        parse_cpus("3-1")


def test_every_gpu_gets_an_equal_disjoint_share_of_the_cpus() -> None:
    layout = plan_layout("all", None, device="cuda", host_cpus=HOST, visible=["0", "1"])
    assert [s.gpu for s in layout.slots] == ["0", "1"]
    assert layout.cpus_per_trial == 16
    assert [s.cpus for s in layout.slots] == [tuple(range(16)), tuple(range(16, 32))]
    assert layout.slots[1].env() == {"CUDA_VISIBLE_DEVICES": "1", CPUS_ENV: "16-31"}


def test_indices_pick_from_the_visible_gpus_and_cpus_per_trial_overrides_the_share() -> None:
    # Indices count the GPUs this process sees: with CUDA_VISIBLE_DEVICES=4,5,6 index 2 is 6.
    layout = plan_layout("0,2", 4, device="cuda", host_cpus=HOST, visible=["4", "5", "6"])
    assert [s.gpu for s in layout.slots] == ["4", "6"]
    assert [s.cpus for s in layout.slots] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert layout.cpus_per_trial == 4


def test_without_gpus_one_trial_at_a_time_pinned_only_when_asked() -> None:
    default = plan_layout(None, None, device="cuda")
    assert default.concurrent == 1 and default.slots[0].env() == {}
    pinned = plan_layout(None, 2, device="cpu", host_cpus=[4, 5, 6])
    assert pinned.slots[0].env() == {CPUS_ENV: "4-5"} and pinned.cpus_per_trial == 2


@pytest.mark.parametrize(("gpus", "cpus", "message"), [
    ("3", None, "--gpus 3: no GPU 3 on this host; the visible GPUs are 0 (0), 1 (1)"),
    ("0,0", None, "--gpus 0,0: a GPU is named twice"),
    ("first", None, "--gpus first: expected 'all' or GPU indices"),
    ("all", 20, "--cpus-per-trial 20 for each of 2 concurrent trials needs 40 CPUs, this "
                "process may use 32 (0-31)"),
    (None, 64, "--cpus-per-trial 64: this process may use 32 CPUs (0-31)"),
])
def test_wrong_flags_are_named_with_what_the_host_has(gpus: str | None, cpus: int | None,
                                                      message: str) -> None:
    with pytest.raises(InputError) as excinfo:
        plan_layout(gpus, cpus, device="cuda", host_cpus=HOST, visible=["0", "1"])
    assert message in str(excinfo.value)


def test_gpus_on_a_cpu_search_or_a_host_without_gpus_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMULATE_ENV, raising=False)
    with pytest.raises(InputError, match="--gpus all: the search runs on cpu"):
        plan_layout("all", None, device="cpu", host_cpus=HOST)
    with pytest.raises(InputError, match="no GPU is visible"):
        plan_layout("all", None, device="cuda", host_cpus=HOST, visible=[])


def test_visible_gpus_without_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(EMULATE_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, GPU-abc")
    assert visible_gpus() == ["2", "GPU-abc"]  # what the parent was given, as given
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert visible_gpus() == ["0", "1"]
    monkeypatch.setenv(EMULATE_ENV, "3")
    assert visible_gpus() == ["0", "1", "2"]


def test_best_yaml_says_which_layout_a_result_holds_for() -> None:
    two = Layout(slots=(Slot(index=0, gpu="0", cpus=(0, 1)), Slot(index=1, gpu="1", cpus=(2, 3))),
                 cpus_per_trial=2, host_cpus=4)
    doc = two.describe()
    assert doc["trials_at_once"] == 2 and doc["gpus"] == ["0", "1"]
    assert doc["pinned"] == ["0-1", "2-3"]
    assert "DDP job of 2 ranks" in doc["holds_for"]
    assert "--gpus 0 --cpus-per-trial 4" in doc["holds_for"]
    assert "all 2 GPUs at once" in doc["confirmation"]
    one = Layout.single(cpus=3).describe()
    assert one["trials_at_once"] == 1 and one["pinned"] is None
    # A CPU search's result holds for no GPU (its best.yaml said "one process on one GPU").
    host = Layout.single().host_cpus
    cpu = Layout.single().describe(device="cpu")["holds_for"]
    assert cpu == f"one process with all {host} CPU{'s' if host > 1 else ''} of this host"
    assert "one GPU" in Layout.single().describe()["holds_for"]
