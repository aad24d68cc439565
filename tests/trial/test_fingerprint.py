"""`fingerprint()`: where a number was measured. The cgroup and cpuinfo parsing on fake files."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os

import pytest
import torch

import autotune.trial.fingerprint as fp_module
from autotune import Fingerprint
from autotune.contract.host import available_cpus
from autotune.trial.fingerprint import _cgroup_cpu_limit, _cpu_model, fingerprint

V2 = "/sys/fs/cgroup/cpu.max"
V1_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
V1_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"
CPUINFO = "/proc/cpuinfo"


class FakePath:
    """`pathlib.Path` as far as fingerprint.py uses it, reading from a dict of fake files."""

    files: dict[str, str] = {}

    def __init__(self, path: str) -> None:
        self.path = str(path)

    def read_text(self) -> str:
        try:
            return self.files[self.path]
        except KeyError:
            raise FileNotFoundError(2, "No such file or directory", self.path) from None


def fake_files(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    fake = type("Fake", (FakePath,), {"files": files})
    monkeypatch.setattr(fp_module, "Path", fake)


# -- the whole fingerprint --------------------------------------------------------------------------


@pytest.mark.parametrize("device", [None, "cpu", torch.device("cpu")])
def test_fingerprint_on_cpu(device: object) -> None:
    fp = fingerprint(device)
    assert isinstance(fp, Fingerprint)
    facts = dataclasses.asdict(fp)
    for key in ("date", "hostname", "python", "torch", "cpu_count", "cpus_available"):
        assert facts[key] is not None, key
    # No GPU facts without a CUDA device.
    for key in ("gpu", "gpu_memory_gb", "gpu_capability", "gpu_multiprocessors", "driver"):
        assert facts[key] is None, key
    assert fp.torch == torch.__version__
    assert fp.cuda == torch.version.cuda
    assert fp.cpu_count == os.cpu_count()
    assert fp.cpus_available == available_cpus()
    assert fp.cpu_model is None or isinstance(fp.cpu_model, str)
    assert fp.device == f"cpu: {fp.cpu_model}"
    limit = fp.cgroup_cpu_limit
    assert limit is None or (isinstance(limit, float) and limit > 0)
    date = datetime.datetime.fromisoformat(fp.date)
    assert date.tzinfo is not None  # UTC, said so
    age = datetime.datetime.now(datetime.timezone.utc) - date
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=5)
    assert json.loads(json.dumps(facts)) == facts  # it travels in result.json


def test_fingerprint_reads_the_fake_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_files(monkeypatch, {V2: "150000 100000\n",
                             CPUINFO: "processor\t: 0\nmodel name\t: Fake CPU @ 3.0GHz\n"})
    fp = fingerprint("cpu")
    assert fp.cgroup_cpu_limit == 1.5
    assert fp.cpu_model == "Fake CPU @ 3.0GHz"


# -- cgroup CPU limit ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({V2: "max 100000\n"}, None),  # v2, unlimited
        ({V2: "200000 100000\n"}, 2.0),
        ({V2: "50000 100000"}, 0.5),
        ({V1_QUOTA: "-1\n", V1_PERIOD: "100000\n"}, None),  # v1, unlimited
        ({V1_QUOTA: "300000\n", V1_PERIOD: "100000\n"}, 3.0),
        ({V2: "garbage", V1_QUOTA: "100000", V1_PERIOD: "50000"}, 2.0),  # v2 unreadable: v1
        ({V1_QUOTA: "100000\n"}, None),  # no period: unknown
        ({V1_QUOTA: "lots", V1_PERIOD: "100000"}, None),
        ({}, None),  # no cgroup files at all (macOS, a bare container)
    ],
    ids=["v2-max", "v2-two", "v2-half", "v1-unlimited", "v1-three", "v2-garbage-then-v1",
         "v1-no-period", "v1-garbage", "none"],
)
def test_cgroup_cpu_limit(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: float | None
) -> None:
    fake_files(monkeypatch, files)
    assert _cgroup_cpu_limit() == expected


def test_cgroup_cpu_limit_here_is_a_number_or_none() -> None:
    limit = _cgroup_cpu_limit()
    assert limit is None or (isinstance(limit, float) and limit > 0)


# -- CPU model ------------------------------------------------------------------------------------------


def test_cpu_model_from_cpuinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    info = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) "
            "Processor @ 2.30GHz\nprocessor\t: 1\nmodel name\t: another\n")
    fake_files(monkeypatch, {CPUINFO: info})
    assert _cpu_model() == "Intel(R) Xeon(R) Processor @ 2.30GHz"  # the first one


def test_cpu_model_without_cpuinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_files(monkeypatch, {})
    monkeypatch.setattr(fp_module.platform, "processor", lambda: "arm")
    assert _cpu_model() == "arm"
    monkeypatch.setattr(fp_module.platform, "processor", lambda: "")
    assert _cpu_model() is None


def test_cpu_model_when_cpuinfo_names_none(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_files(monkeypatch, {CPUINFO: "processor\t: 0\nHardware\t: BCM2835\n"})
    monkeypatch.setattr(fp_module.platform, "processor", lambda: "")
    assert _cpu_model() is None
