"""Side by side: a search's winner against its grid's optimum, measured in one run.

    python benchmarks/search/versus.py --adapter adapters/resnet.py \
        --best results/h100/search/resnet/best.yaml --grid results/h100/grids/resnet.json \
        [--against OTHER.yaml ...] [--runs 3] [--measure-seconds 20] [--json OUT.json]

`--against` adds configs (a best.yaml or a config YAML, adapter `params:` included) to the
rotation; without `--grid` the first of them stands for the optimum (a space with no grid: the
best config known by hand).

A search's confirmed median and a grid cell measured an hour earlier are two runs of a noisy
machine; their ratio mixes the search's choice with the drift between the runs. This runs the
winner's config and the grid's optimum config alternately (A B A B ...), each time in a fresh
process exactly as a confirmation run measures, and reports each one's median and the ratio of
the medians, with the lowest and highest ratio of one run against the other's median. When the
grid's optimum is the winner's own config and nothing else is to run, the ratio is 1 by
definition and nothing is run.

`--grid-top K` runs the grid's K fastest configs (over every `--grid` given: a space whose
batch may vary holds the fixed batch's grid too), not its fastest alone. A grid cell is one
search trial's short window, and the highest of many such reads is the luckiest as often as
the fastest: an H100 input-bound grid's top cell read 13.9k images/s with windows 71% apart,
and its config ran 9.7-11.3k fresh. `grid_best` is then the highest median of those K configs
run side by side (a config with no ok run left out, and said), and `ratio_to_grid_best` the
winner's median over it; recorded even when the top cell's own config had no ok run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import autotune  # noqa: E402
from autotune.contract.config import TrainConfig  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402


def grid_optimum(path: Path) -> tuple[TrainConfig, float]:
    (config, value), = grid_top([path], 1)
    return config, value


def grid_top(paths: list[Path], k: int) -> list[tuple[TrainConfig, float]]:
    """The `k` fastest distinct configs of the grids' ok cells, with their cells' rates."""
    ok = [c for path in paths for c in json.loads(path.read_text())["cells"]
          if c["result"]["status"] == "ok" and c["result"]["throughput"]]
    if not ok:
        raise SystemExit(f"{', '.join(map(str, paths))}: no cell ran ok; nothing to compare with")
    top: dict[TrainConfig, float] = {}
    for cell in sorted(ok, key=lambda c: -c["result"]["throughput"]):
        config = TrainConfig(**cell["config"])
        if config not in top and len(top) < k:
            top[config] = float(cell["result"]["throughput"])
    return list(top.items())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--best", type=Path, required=True, help="the search's best.yaml")
    p.add_argument("--grid-top", type=int, default=1,
                   help="run the grid's K fastest configs, not its fastest alone")
    p.add_argument("--grid", type=Path, action="append", default=None,
                   help="the grid JSON (benchmarks/search/grid.py)")
    p.add_argument("--against", type=Path, action="append", default=[],
                   help="another config YAML to run in the rotation (repeatable)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--runs", type=int, default=3, help="fresh runs of each config")
    p.add_argument("--measure-seconds", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.grid is None and not args.against:
        p.error("give --grid, or --against with the config that stands for the optimum")

    winner = autotune.load_config(args.best).config
    top = grid_top(args.grid, max(1, args.grid_top)) if args.grid is not None else []
    # The grid's next fastest, each once (the winner's own config runs as "winner").
    grids = [(f"grid-{i + 2}", c) for i, (c, _) in enumerate(top[1:]) if c != winner]
    others: list[tuple[str, TrainConfig]] = []
    for path in args.against:  # names as the rotation prints them, each once
        taken = {"winner", "optimum"} | {n for n, _ in grids + others}
        name = next(n for i in range(len(taken) + 2)
                    if (n := path.stem if not i else f"{path.stem}-{i + 1}") not in taken)
        others.append((name, autotune.load_config(path).config))
    if top:
        (optimum, grid_value), others = top[0], grids + others
    else:
        (_, optimum), others, grid_value = others[0], others[1:], None
    unit = autotune.load_adapter(args.adapter).unit
    summary: dict[str, object] = {
        "adapter": args.adapter, "best": str(args.best), "unit": unit,
        "grid": ", ".join(map(str, args.grid)) if args.grid else str(args.against[0]),
        "winner_config": winner.to_dict(), "optimum_config": optimum.to_dict(),
        "optimum_in_grid": grid_value,
    }
    fingerprint = None
    if winner == optimum and not others:
        summary.update(ratio=1.0, note="the winner is the grid's optimum config")
        print(f"VERSUS {Path(args.adapter).stem}: the winner is the grid's optimum config")
    else:
        rotation = [("winner", winner)] + ([("optimum", optimum)] if winner != optimum else [])
        rotation += others
        values: dict[str, list[float]] = {name: [] for name, _ in rotation}
        measure = MeasureSettings(budget_seconds=args.measure_seconds)
        with tempfile.TemporaryDirectory() as tmp:
            runner = SubprocessRunner(cache_dir=Path(tmp) / "compile-cache")
            for i in range(args.runs):
                for name, config in rotation:
                    request = TrialRequest(adapter=args.adapter, config=config, device=args.device,
                                           measure=measure, number=i, diagnose=False)
                    result = runner.run(request, Path(tmp) / f"{name}{i}", timeout=args.timeout)
                    if result.status is not Status.OK or not result.throughput:
                        print(f"{name} run {i + 1}: {result.status.value} {result.reason}")
                        continue
                    values[name].append(result.throughput)
                    if args.json is not None:  # what ran so far, should the call end early
                        args.json.write_text(json.dumps(summary | {"runs": values}, indent=1))
                    fingerprint = fingerprint or result.fingerprint
                    print(f"{name} run {i + 1}/{args.runs}: {result.throughput:,.0f} {unit}/s "
                          f"({config.describe()})", flush=True)
        if winner == optimum:
            values["optimum"] = values["winner"]
        summary["others"] = {name: {"config": config.to_dict(), "runs": values[name],
                                    "median": statistics.median(values[name])
                                    if values[name] else None}
                             for name, config in others}
        for name, config in others:
            if values[name] and values["winner"]:
                print(f"VERSUS {name}: {statistics.median(values[name]):,.0f} {unit}/s, the "
                      f"winner {statistics.median(values['winner']) / statistics.median(values[name]):.3f}x "
                      f"({config.describe()})")
        w = statistics.median(values["winner"]) if values["winner"] else None
        if w is not None and len(top) > 1:  # the best of the grid's top, whichever ran
            summary.update(winner_runs=values["winner"], winner_median=w,
                           **_grid_best(top, winner, values, w, unit))
        if w is None or not values["optimum"]:
            print("no comparison with the grid's optimum config: a config had no ok run",
                  file=sys.stderr)
            if args.json is not None:
                args.json.write_text(json.dumps(summary | {"runs": values}, indent=1))
            return 0 if "grid_best_median" in summary else 1
        o = statistics.median(values["optimum"])
        summary.update(
            winner_runs=values["winner"], optimum_runs=values["optimum"],
            winner_median=w, optimum_median=o, ratio=w / o,
            ratio_low=min(values["winner"]) / o, ratio_high=max(values["winner"]) / o)
        print(f"VERSUS {Path(args.adapter).stem}: winner {w:,.0f} vs grid optimum config "
              f"{o:,.0f} {unit}/s side by side: ratio {w / o:.3f} "
              f"(runs {min(values['winner']) / o:.3f}-{max(values['winner']) / o:.3f})")
    if fingerprint is not None:
        summary.update(device=fingerprint.gpu or fingerprint.cpu_model, torch=fingerprint.torch,
                       date=fingerprint.date)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


def _grid_best(top: list[tuple[TrainConfig, float]], winner: TrainConfig,
               values: dict[str, list[float]], w: float, unit: str) -> dict[str, object]:
    """The grid's top configs as they ran side by side: each one's cell and median, the
    highest median (`grid_best`) and the winner's median over it."""
    names = ["optimum"] + [f"grid-{i + 2}" for i in range(len(top) - 1)]
    ran = []
    for name, (config, cell) in zip(names, top):
        runs = values["winner"] if config == winner else values.get(name, [])
        ran.append({"config": config.to_dict(), "cell": cell, "runs": runs,
                    "median": statistics.median(runs) if runs else None})
    for r in ran:
        if r["median"] is None:
            print(f"VERSUS grid top: no ok run of {TrainConfig(**r['config']).describe()} (its "
                  f"cell {r['cell']:,.0f}): left out of the grid's best")
    measured = [r for r in ran if r["median"]]
    if not measured:
        return {"grid_top": ran}
    best = max(measured, key=lambda r: r["median"])
    print(f"VERSUS grid top {len(measured)} of {len(top)}: best median {best['median']:,.0f} "
          f"{unit}/s (its cell {best['cell']:,.0f}); the winner {w / best['median']:.3f}x")
    return {"grid_top": ran, "grid_best_median": best["median"],
            "grid_best_config": best["config"], "ratio_to_grid_best": w / best["median"]}


if __name__ == "__main__":
    sys.exit(main())
