"""Shared by the tests: the checkout's paths, the CLI as a subprocess, a scripted fake runner
and a search over it, a fake clock, CSV rows, stored trials read back as records, and the processes a search leaves
behind."""

from __future__ import annotations

import csv
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout: `python -m autotune` runs from here, so the package of this checkout is used."""
TEST_ADAPTERS = Path(__file__).resolve().parent / "adapters"

# `pytest` (not only `python -m pytest`) should import the package of this checkout.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from optuna.trial import TrialState, create_trial  # noqa: E402

from autotune.contract.request import TrialRequest  # noqa: E402 -- needs the path above
from autotune.contract.result import Status, TrialResult  # noqa: E402
from autotune.study.execution.protocol import RunnerBase  # noqa: E402
from autotune.study.store.records import TrialRecord  # noqa: E402


def benchmark_script(relative: str) -> Any:
    """A script under benchmarks/ (not a package) loaded as a module, by its path."""
    path = REPO_ROOT / "benchmarks" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ONE_GLOO_RANK = """
import faulthandler, os, sys
import torch.distributed as dist
faulthandler.dump_traceback_later({dump}, exit=True)  # a hang shows where, then ends
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
try:
{body}
except BaseException:
    import traceback
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(1)  # a failing check leaves at once too, its traceback printed
sys.stdout.flush()
os._exit(0)  # no destroy_process_group: nothing after the checks can hang
"""


def in_one_gloo_rank(body: str, timeout: float = 120) -> str:
    """Run `body` (Python source, at top level) in a fresh process that is the one rank of a gloo
    group over an in-memory store, and give back what it printed. A CI run once hung for an hour
    in the in-process form of this (a one-rank gloo group in the pytest process, never seen
    here): a child process is bounded by `timeout`, prints its stacks if it hangs, and leaves
    without gloo's teardown. A child that hangs is started once more (gloo's, not the code under
    test's, bounded by the dump before `timeout`); one that fails, or hangs twice, fails the
    test with what it printed."""
    code = ONE_GLOO_RANK.format(dump=max(timeout - 20, 1),
                                body=textwrap.indent(textwrap.dedent(body), "    "))
    hung = ""
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if "Timeout (" not in done.stderr:  # faulthandler's words when it dumps and exits
            break
        hung += done.stderr[-4000:]
    assert done.returncode == 0, (f"exit {done.returncode}\n"
                                  + (hung if "Timeout (" in done.stderr else done.stderr[-4000:]))
    return done.stdout


def run_autotune(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m autotune ARGS...` from the repository root, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "autotune", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


Script = Callable[[int, TrialRequest], TrialResult]


def ok_by_batch_size(call: int, request: TrialRequest) -> TrialResult:
    """Larger batches are faster, as on a real machine until memory runs out."""
    return TrialResult(status=Status.OK, throughput=100.0 * request.config.batch_size,
                       duration_seconds=1.0)


def compute_bound_by_dtype(config: Any) -> TrialResult:
    """A compute-bound trial whose rate is set by its dtype (fp32 100, tf32 150, bf16 140),
    1.5x when compiled."""
    from autotune.contract.result import Diagnosis, Verdict

    rate = {"fp32": 100.0, "tf32": 150.0, "bf16": 140.0}[config.amp_dtype]
    rate *= 1.5 if config.compile != "none" else 1.0
    return TrialResult(status=Status.OK, throughput=rate, diagnosis=Diagnosis(
        verdict=Verdict.COMPUTE, suggestion="", throughput=rate, loader_rate=1e7,
        compute_rate=rate, data_wait_fraction=0.0, gpu_busy_fraction=0.95))


class FakeRunner(RunnerBase):
    """Answers each trial from a script, runs nothing, and remembers what it was asked."""

    def __init__(self, script: Script = ok_by_batch_size) -> None:
        self.script = script
        self.requests: list[TrialRequest] = []
        self.timeouts: list[float] = []

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.requests.append(request)
        self.timeouts.append(timeout)
        return self.script(len(self.requests) - 1, request)


def fake_search(tmp_path: Path, raw: dict[str, Any], adapter: Any, script: Script, *,
                trials: int, device: str = "cuda") -> tuple[list[TrialRequest], Any]:
    """A search of `adapter` over the space `raw` on `device` whose trials read `script`
    (cpus 16, seed 0, no confirmation): the requests it ran, and its study."""
    import optuna

    from autotune.outputs.display import QuietListener
    from autotune.study.search import Search, SearchSettings
    from autotune.study.space.file import parse_space

    space = parse_space(raw, source="s.yaml", adapter=adapter, device_type=device, cpus=16)
    runner = FakeRunner(script)
    settings = SearchSettings(adapter=tmp_path / "a.py", space_source="s.yaml", device=device,
                              out=tmp_path / "out", storage=str(tmp_path / "study.db"),
                              study_name="t", trials=trials, seed=0, confirm=0)
    Search(settings, space, adapter, runner=runner, listener=QuietListener()).run()
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path / 'study.db'}")
    return runner.requests, study


class FakeClock:
    """A clock that stands still until a test moves `now`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RecompilingStep:
    """A train step on a `FakeClock`: `step` seconds a call; the calls numbered in
    `recompile_at` also compile for `compile` seconds, which its compile timer (`compiled`, the
    process's compile seconds) counts."""

    def __init__(self, clock: FakeClock, recompile_at: set[int], *, step: float,
                 compile: float) -> None:
        self.clock, self.recompile_at = clock, recompile_at
        self.step, self.compile = step, compile
        self.calls = 0
        self.compiled = 0.0

    def __call__(self) -> Any:
        from autotune.trial.warmup import StepResult

        if self.calls in self.recompile_at:
            self.clock.now += self.compile
            self.compiled += self.compile
        self.clock.now += self.step
        self.calls += 1
        return StepResult(items=8, data_wait=0.0)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def stored_trial(
    number: int,
    *,
    state: TrialState = TrialState.COMPLETE,
    value: float | None = None,
    attrs: dict[str, Any] | None = None,
) -> TrialRecord:
    """A trial as a study stores it (an Optuna trial with autotune's user attributes, raw), read
    back the way autotune reads it."""
    trial = create_trial(state=state, value=value if state == TrialState.COMPLETE else None,
                         user_attrs=attrs or {})
    trial.number = number
    return TrialRecord.from_trial(trial)


# -- processes ------------------------------------------------------------------------------------------

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"
"""The test adapters record each pid as an empty file "<kind>-<pid>" in this folder (when set)."""
TAG_ENV = "AUTOTUNE_TEST_TAG"
"""Set in each search's environment: every process it starts inherits it, so /proc finds them."""


def process_state(pid: int) -> str | None:
    """The state letter in /proc/PID/stat (R, S, D, Z, ...), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def recorded_pids(folder: Path, kind: str | None = None) -> list[int]:
    """The pids recorded in `folder` as "<kind>-<pid>" files, sorted; every kind when None."""
    pattern = f"{kind}-*" if kind else "*-*"
    return sorted({int(p.name.split("-", 1)[1]) for p in folder.glob(pattern)})


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment holds TAG_ENV=tag (zombies have an empty environ)."""
    wanted = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def leftovers(pids: list[int], tag: str, wait: float = 5.0) -> dict[int, str | None]:
    """The processes (recorded or tagged) not gone within `wait` seconds, with their states;
    brief zombies that init reaps meanwhile are fine, a lasting one is a leak."""
    deadline = time.monotonic() + wait
    while True:
        left = {p: process_state(p) for p in {*pids, *tagged_pids(tag)}}
        left = {p: s for p, s in left.items() if s is not None}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill_all(pids: list[int], tag: str | None = None) -> None:
    """Cleanup after a failed test: never leave a hung process (listed, or tagged) on the machine."""
    for pid in {*pids, *(tagged_pids(tag) if tag is not None else ())}:
        if process_state(pid) not in (None, "Z", "X"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def check_padded_per_batch(adapter: Any, samples: list[dict[str, Any]], collate: Any, *,
                           shortest: int, longest: int) -> None:
    """A transformers example's batch: documents of several lengths within [shortest, longest],
    padded to the batch's longest; real tokens counted; the padding's labels -100 (ignored by
    the loss), the real tokens' labels the inputs."""
    import torch

    lengths = [len(s["input_ids"]) for s in samples]
    assert len(set(lengths)) > 1 and all(shortest <= n <= longest for n in lengths)
    batch = collate(samples)
    assert batch["input_ids"].shape == (len(samples), max(lengths))
    assert adapter.items(batch) == sum(lengths)
    real = batch["attention_mask"].bool()
    assert bool((batch["labels"][~real] == -100).all())
    assert torch.equal(batch["labels"][real], batch["input_ids"][real])


def tiny_example(monkeypatch: Any, path: Path, sizes: dict[str, str]) -> Path:
    """`path`, an example adapter, at the tiny `sizes` (environment variables it reads when it
    is imported)."""
    for name, value in sizes.items():
        monkeypatch.setenv(name, value)
    return path


def tiny_transformers_example(monkeypatch: Any, path: Path, sizes: dict[str, str]) -> Path:
    """`tiny_example` for a transformers example: skips the test without transformers."""
    import pytest

    pytest.importorskip("transformers", reason=f"{path.relative_to(REPO_ROOT)} needs "
                                               "pip install -e '.[hf]'")
    return tiny_example(monkeypatch, path, sizes)
