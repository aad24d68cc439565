"""Bad input: each mistake exits 1 with one message naming the file or flag and the fix, before
any trial runs (no trials/ folder), and YAML never runs code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import TEST_ADAPTERS, run_autotune

pytestmark = pytest.mark.slow  # every test starts `python -m autotune` (seconds of imports)

TINY = TEST_ADAPTERS / "tiny.py"


def search(tmp_path: Path, *extra: str | Path, out: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_autotune("search", "--adapter", TINY, "--device", "cpu", "--trials", "1",
                        "--out", out or tmp_path / "out", "--measure-seconds", "1", "--confirm", "0",
                        *extra, timeout=120)


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def assert_refused(proc: subprocess.CompletedProcess[str], out: Path, *fragments: str) -> None:
    """Exit 1, one message (no traceback) holding every fragment, and no trial started."""
    assert proc.returncode == 1, failure(proc)
    message = " ".join(proc.stderr.split())  # long messages may be wrapped
    for fragment in fragments:
        assert fragment in message, failure(proc)
    assert "Traceback" not in proc.stderr, failure(proc)
    assert not (out / "trials").exists()
    assert not (out / "best.yaml").exists()


# -- search spaces -----------------------------------------------------------------------------------------

BAD_SPACES = {
    "unknown-knob": ("workers: {low: 0, high: 1}\n",
                     ("unknown knob 'workers'", "known knobs: batch_size, grad_accum, num_workers")),
    "wrong-type": ("num_workers: {choices: [zero, 1]}\n",
                   ("key 'num_workers'", "values must be integers", "'zero'")),
    "empty-choices": ("amp_dtype: {choices: []}\n",
                      ("key 'amp_dtype'", "'choices' is empty", "list at least one value")),
    "condition-on-unknown-knob": (
        "num_workers: {low: 0, high: 1}\ncompile: {choices: [none], when: \"precision == bf16\"}\n",
        ("key 'compile.when'", "unknown knob 'precision'", "known knobs:")),
    "low-above-high": ("num_workers: {low: 2, high: 0}\n",
                       ("key 'num_workers'", "low=2 is greater than high=0", "swap them")),
}


@pytest.mark.parametrize("case", list(BAD_SPACES))
def test_bad_space_file_exits_1_before_any_trial(tmp_path: Path, case: str) -> None:
    text, fragments = BAD_SPACES[case]
    space = tmp_path / f"{case}.yaml"
    space.write_text(text)
    out = tmp_path / "out"
    proc = search(tmp_path, "--space", space, out=out)
    assert_refused(proc, out, str(space), *fragments)
    assert not (out / "study.db").exists()


def test_space_yaml_is_read_safely(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    space = tmp_path / "evil.yaml"
    space.write_text(f'num_workers: !!python/object/apply:os.system ["touch {marker}"]\n')
    out = tmp_path / "out"
    proc = search(tmp_path, "--space", space, out=out)
    assert_refused(proc, out, str(space), "not valid YAML")
    assert not marker.exists(), "the YAML tag ran a command"


def test_config_yaml_is_read_safely(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    best = tmp_path / "best.yaml"
    best.write_text(f'config: !!python/object/apply:os.system ["touch {marker}"]\n')
    proc = run_autotune("apply", best, "--", "true")
    assert proc.returncode == 1, failure(proc)
    assert str(best) in proc.stderr and "not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists(), "the YAML tag ran a command"


def test_study_pointer_yaml_does_not_run_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "study.yaml").write_text(
        f'study_name: !!python/object/apply:os.system ["touch {marker}"]\nstorage: x.db\n')
    proc = run_autotune("show", tmp_path)
    assert proc.returncode == 1, failure(proc)
    assert not marker.exists(), "the YAML tag ran a command"


def test_show_with_invalid_study_yaml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "study.yaml").write_text("study_name: [unclosed\n")
    proc = run_autotune("show", tmp_path)
    assert proc.returncode == 1, failure(proc)
    assert str(tmp_path / "study.yaml") in proc.stderr, failure(proc)
    assert "Traceback" not in proc.stderr, failure(proc)


def test_space_file_not_text_exits_1_with_a_message(tmp_path: Path) -> None:
    space = tmp_path / "latin1.yaml"
    space.write_bytes(b"# caf\xe9\nnum_workers: {choices: [0, 1]}\n")
    out = tmp_path / "out"
    proc = search(tmp_path, "--space", space, out=out)
    assert_refused(proc, out, str(space))


# -- flags -------------------------------------------------------------------------------------------------

BAD_FLAGS = {
    "timeout-negative": (("--timeout", "-1"), ("--timeout", "must be greater than 0")),
    "trial-timeout-zero": (("--trial-timeout", "0"), ("--trial-timeout", "must be greater than 0")),
    "confirm-negative": (("--confirm", "-1"), ("--confirm -1", "must be 0 (no confirmation) or more")),
    "tolerance-above-1": (("--tolerance", "2"), ("--tolerance 2", "a fraction below 1")),
    "confirm-repeats-zero": (("--confirm-repeats", "0"), ("--confirm-repeats", "must be greater than 0")),
    "grace-within-heartbeat": (("--heartbeat-interval", "10", "--grace-period", "5"),
                               ("--grace-period 5", "longer than --heartbeat-interval 10")),
}


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_flag_out_of_range_exits_1_before_any_trial(tmp_path: Path, case: str) -> None:
    flag, fragments = BAD_FLAGS[case]
    out = tmp_path / "out"
    proc = search(tmp_path, *flag, out=out)
    assert_refused(proc, out, *fragments)
    assert not (out / "study.db").exists()


def test_negative_seed_exits_1_with_a_message(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = search(tmp_path, "--seed", "-1", out=out)
    assert_refused(proc, out, "--seed")


@pytest.mark.parametrize("flag", ["--tolerance", "--trial-timeout"])
def test_nan_flag_exits_1_naming_it(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "out"
    # --timeout 0.5 leaves no time for a trial, so a build that accepts nan costs nothing here.
    proc = search(tmp_path, flag, "nan", "--timeout", "0.5", out=out)
    assert_refused(proc, out, flag)


# -- where results go --------------------------------------------------------------------------------------


def test_out_under_a_regular_file_exits_1(tmp_path: Path) -> None:
    # Tests run as root, where permissions do not stop writes: a path under a file does.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file\n")
    out = blocker / "out"
    proc = search(tmp_path, out=out)
    assert_refused(proc, out, f"--out {out}", "cannot write there", "pick a folder you can write to")
    assert blocker.read_text() == "a file\n"


def test_out_under_proc_exits_1(tmp_path: Path) -> None:
    out = Path("/proc/autotune-test-out/results")
    proc = search(tmp_path, out=out)
    assert_refused(proc, out, f"--out {out}", "cannot write there", "pick a folder you can write to")


@pytest.mark.parametrize(
    ("storage", "fragments"),
    [
        ("sqlite:////nonexistent_dir/x.db", ("unable to open database file", "check the URL")),
        # (psycopg2-binary is in the test extra: the driver is there, the host is not)
        ("postgresql://nohost:1/db", ("nohost", "check the URL", "that the server runs")),
    ],
    ids=["sqlite-in-missing-folder", "postgresql-unreachable"],
)
def test_storage_that_cannot_be_opened_exits_1(tmp_path: Path, storage: str, fragments: tuple[str, ...]) -> None:
    out = tmp_path / "out"
    proc = search(tmp_path, "--storage", storage, out=out)
    assert_refused(proc, out, f"--storage {storage}", "cannot open it", *fragments)
    assert not Path("/nonexistent_dir").exists()
