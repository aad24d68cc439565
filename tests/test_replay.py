"""The replay benchmark (benchmarks/search/replay.py) runs the real search loop against a measured
grid in simulated time: deterministic, seconds of CPU, and every policy finds the optimum."""

from __future__ import annotations

import json
import math
from pathlib import Path

from helpers import REPO_ROOT, benchmark_script

GRID = REPO_ROOT / "tests" / "data" / "grid-cpu.json"


def test_replay_is_deterministic_and_every_policy_reaches_the_optimum(tmp_path: Path) -> None:
    replay = benchmark_script("search/replay.py")
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert replay.main([str(GRID), "--seeds", "3", "--json", str(first)]) == 0
    assert replay.main([str(GRID), "--seeds", "3", "--json", str(second)]) == 0
    assert first.read_text() == second.read_text()
    (row,) = json.loads(first.read_text())
    assert row["cells"] == 40
    for policy in ("autotune", "tpe", "random"):
        times = row[policy]["seconds"]
        assert len(times) == 3
        assert all(0 < float(t) < math.inf for t in times), (policy, times)
        assert float(row[policy]["median_seconds"]) <= row["grid_seconds"]


def test_grid_runner_charges_a_pruned_trial_only_what_ran() -> None:
    replay = benchmark_script("search/replay.py")
    grid = replay.load_grid(GRID)
    clock = replay.SimClock()
    runner = replay.GridRunner(grid["cells"], clock)
    config, result = next((c, r) for c, r in grid["cells"].items() if len(r.window_throughputs) > 3)
    from autotune.contract.request import TrialRequest

    def prune_after_two(event: object) -> None:
        prune_after_two.seen += 1  # type: ignore[attr-defined]
        if prune_after_two.seen == 2:  # type: ignore[attr-defined]
            runner.prune("test")

    prune_after_two.seen = 0  # type: ignore[attr-defined]
    pruned = runner.run(TrialRequest(adapter="a.py", config=config, device="cpu"), Path("."),
                        timeout=1e9, on_event=prune_after_two)
    assert pruned.status.value == "pruned" and pruned.windows == 2
    assert 0 < clock.now < result.duration_seconds
    full = replay.GridRunner(grid["cells"], clock).run(
        TrialRequest(adapter="a.py", config=config, device="cpu"), Path("."), timeout=1e9)
    assert full is result


COMMITTED = ("results/replay.json", "results/h100/replay-augment.json",
             "results/h100/replay-regrid.json", "results/h200/replay.json")


def test_the_committed_replay_figures_hold_for_todays_search() -> None:
    """The policy's path on every committed grid (results/README.md's replay tables) is what the
    committed JSONs say: a change to the search that moves it fails here until the figures are
    replayed again (`benchmarks/search/replay.py ... --json`). The autotune policy is
    deterministic, so one seed stands for the twenty."""
    replay = benchmark_script("search/replay.py")
    checked = 0
    for name in COMMITTED:
        for row in json.loads((REPO_ROOT / name).read_text()):
            grid = replay.load_grid(REPO_ROOT / row["grid"])
            assert grid["optimum"] == row["optimum"], row["grid"]
            seconds = replay.replay(grid, "autotune", 0, row["target"])
            assert seconds == row["autotune"]["seconds"][0], (name, row["grid"], seconds)
            checked += 1
    assert checked == 10
