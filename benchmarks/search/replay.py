"""Replay search policies against a measured grid, in simulated time.

    python benchmarks/search/replay.py GRID.json [GRID.json ...] [--seeds 20] [--target 0.98]
        [--json results/replay.json]

A grid (`benchmarks/search/grid.py`) holds every config of a small space measured on a GPU, with the
seconds each one cost (start, compose, compile, warm-up, windows, diagnosis). Each policy runs
the real search loop (`autotune.study.search.Search`) over that space with a runner that looks
results up in the grid and advances a simulated clock by what the trial cost there; a pruned
trial costs what ran before the prune. Reported per grid and policy: the median over seeds of
the simulated seconds until the search's best reaches `target` x the grid's optimum, against
the time the whole grid took, and the floor: the baseline's cell, then the cheapest cell at the
target (no search that measures the baseline first is faster). Policies:
- autotune: baseline, hand recipe, diagnosis-guided ladder, then TPE, with pruning;
- tpe: the baseline, then multivariate TPE alone, no pruning;
- random: the baseline, then random sampling, no pruning.
Deterministic for a given grid and seeds; seconds of CPU, no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402

from autotune.adapter import Adapter  # noqa: E402
from autotune.contract.config import TrainConfig  # noqa: E402
from autotune.contract.events import WindowEvent  # noqa: E402
from autotune.contract.request import TrialRequest  # noqa: E402
from autotune.contract.result import Status, TrialResult  # noqa: E402
from autotune.outputs.display import QuietListener  # noqa: E402
from autotune.study.execution.protocol import RunnerBase  # noqa: E402
from autotune.study.search import Search, SearchSettings  # noqa: E402
from autotune.study.space.file import parse_space  # noqa: E402

POLICIES = {
    "autotune": {"guided": True, "prune": True, "sampler": "tpe"},
    "tpe": {"guided": False, "prune": False, "sampler": "tpe"},
    "random": {"guided": False, "prune": False, "sampler": "random"},
}


class SimClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cell_seconds(result: TrialResult) -> float:
    return float(result.duration_seconds or 0.0)


def compile_costs(cells: dict[TrainConfig, TrialResult]) -> dict[tuple[object, ...], tuple[float, float]]:
    """Per graph, the (cold, warm) compile seconds the grid measured: the grid compiled each
    graph once cold and then hit the cache, so a cell's own compile time says what its place
    in the grid's order cost, not what it costs in a search that meets it first or later."""
    seconds: dict[tuple[object, ...], list[float]] = {}
    for config, result in cells.items():
        graph = config.graph
        if graph is not None and result.compile_seconds is not None:
            seconds.setdefault(graph, []).append(result.compile_seconds)
    return {g: (max(v), min(v)) for g, v in seconds.items()}


class GridRunner(RunnerBase):
    """A runner that answers from the grid and charges the simulated clock: a cell's measured
    seconds, with its compile charged cold the first time the search meets its graph and warm
    (a cache hit) after."""

    prunes = True

    def __init__(self, cells: dict[TrainConfig, TrialResult], clock: SimClock) -> None:
        self.cells = cells
        self.clock = clock
        self._prune = False
        self.costs = compile_costs(cells)
        self.compiled: set[tuple[object, ...]] = set()

    def seconds(self, config: TrainConfig, result: TrialResult) -> float:
        graph = config.graph
        if graph is None or graph not in self.costs or result.compile_seconds is None:
            return cell_seconds(result)
        cold, warm = self.costs[graph]
        charged = warm if graph in self.compiled else cold
        self.compiled.add(graph)
        return max(0.0, cell_seconds(result) - result.compile_seconds + charged)

    def prune(self, reason: str) -> None:
        self._prune = True

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        self._prune = False
        result = self.cells.get(request.config)
        if result is None:
            raise KeyError(f"config not in the grid: {request.config.describe()}")
        windows = list(result.window_throughputs)
        phases = result.phases
        timed = phases.get("windows", 0.0)
        total = self.seconds(request.config, result)
        before = total - timed - phases.get("diagnosis", 0.0)
        for k, rate in enumerate(windows, start=1):
            if on_event is not None:
                on_event(WindowEvent(throughput=rate))
            if self._prune:
                self.clock.now += max(0.0, before) + timed * k / len(windows)
                return TrialResult(status=Status.PRUNED, reason="pruned",
                                   throughput=statistics.median(windows[:k]), windows=k,
                                   window_throughputs=tuple(windows[:k]))
        self.clock.now += min(total, timeout)
        if total > timeout:
            return TrialResult(status=Status.TIMEOUT, reason="budget")
        return result


class Watcher(QuietListener):
    """Stops the search once its best reaches the target; remembers when."""

    def __init__(self, clock: SimClock, target: float) -> None:
        self.clock = clock
        self.target = target
        self.best = 0.0
        self.reached: float | None = None
        self.search: Search | None = None

    def trial_finished(self, number: int, result: TrialResult, winner: Any) -> None:
        if result.status is Status.OK and result.throughput:
            self.best = max(self.best, result.throughput)
        if self.reached is None and self.best >= self.target:
            self.reached = self.clock.now
            assert self.search is not None
            self.search.stop()


def load_grid(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    adapter = type("GridAdapter", (Adapter,), {
        "unit": doc["unit"], "batch_size": doc["batch_size"],
        "global_batch_size": doc["global_batch_size"],
        # Grids recorded before the effective batch was kept by default: with a global batch
        # size the accumulation kept it (as now), without one the batch varied freely.
        "vary_global_batch": doc.get("vary_global_batch", doc["global_batch_size"] is None)})
    space = parse_space(doc["space"], source=str(path), adapter=adapter,
                        device_type=doc["device"], cpus=doc["cpus"])
    cells = {TrainConfig(**c["config"]): TrialResult.from_dict(c["result"]) for c in doc["cells"]}
    missing = [c for c in space.enumerate() if c not in cells]
    if missing:
        raise SystemExit(f"{path}: {len(missing)} config(s) of its space are not in the grid")
    ok = [r.throughput for r in cells.values() if r.status is Status.OK and r.throughput]
    return {"doc": doc, "adapter": adapter, "space": space, "cells": cells,
            "optimum": max(ok), "grid_seconds": sum(cell_seconds(r) for r in cells.values())}


def replay(grid: dict[str, Any], policy: str, seed: int, target: float) -> float:
    """Simulated seconds until the best reaches `target` x the optimum (the grid's whole time,
    or more, when it never does within that budget)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    clock = SimClock()
    watcher = Watcher(clock, target * grid["optimum"])
    budget = grid["grid_seconds"]
    with tempfile.TemporaryDirectory() as tmp:
        settings = SearchSettings(
            adapter=Path(grid["doc"]["adapter"]), space_source="grid", device=grid["doc"]["device"],
            out=Path(tmp), storage=":memory:", study_name=f"{policy}-{seed}", trials=10_000,
            timeout=budget, trial_timeout=1e9, seed=seed, confirm=0, cpus=grid["doc"]["cpus"],
            **POLICIES[policy])
        search = Search(settings, grid["space"], grid["adapter"],
                        runner=GridRunner(grid["cells"], clock), listener=watcher, clock=clock)
        watcher.search = search
        search.run()
    return watcher.reached if watcher.reached is not None else math.inf


def floor_seconds(grid: dict[str, Any], target: float) -> float:
    """The least any search that measures the baseline first can take: the baseline's cell,
    then straight to the cheapest cell at `target` x the optimum, its compile paid cold."""
    runner = GridRunner(grid["cells"], SimClock())
    base = grid["space"].baseline
    first = runner.seconds(base, grid["cells"][base])
    goal = target * grid["optimum"]
    return first + min(GridRunner(grid["cells"], SimClock()).seconds(c, r)
                       for c, r in grid["cells"].items()
                       if r.status is Status.OK and (r.throughput or 0.0) >= goal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grids", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.98)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    report = []
    for path in args.grids:
        grid = load_grid(path)
        row: dict[str, Any] = {"grid": str(path), "bound": grid["doc"].get("bound"),
                               "cells": len(grid["cells"]),
                               "grid_seconds": round(grid["grid_seconds"], 1),
                               "optimum": grid["optimum"], "target": args.target}
        for policy in POLICIES:
            times = [replay(grid, policy, seed, args.target) for seed in range(args.seeds)]
            median = statistics.median(times)
            row[policy] = {"median_seconds": median, "seconds": times,
                           "fraction_of_grid": median / grid["grid_seconds"]}
        row["speedup_vs_tpe"] = row["tpe"]["median_seconds"] / row["autotune"]["median_seconds"]
        row["floor_seconds"] = floor_seconds(grid, args.target)
        # Measuring the baseline first, no policy can beat TPE by more than this on this grid.
        row["speedup_vs_tpe_at_most"] = row["tpe"]["median_seconds"] / row["floor_seconds"]
        report.append(row)
        print(f"{path.name}: {row['cells']} cells, grid {row['grid_seconds']:.0f} s; median "
              f"seconds to {args.target:.0%} of the optimum over {args.seeds} seeds: "
              + ", ".join(f"{p} {row[p]['median_seconds']:.0f} s "
                          f"({row[p]['fraction_of_grid']:.0%} of the grid)" for p in POLICIES)
              + f"; autotune is {row['speedup_vs_tpe']:.1f}x faster than TPE (the floor, the "
                f"baseline then the cheapest cell at the target, is {row['floor_seconds']:.0f} s: "
                f"at most {row['speedup_vs_tpe_at_most']:.1f}x)", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
