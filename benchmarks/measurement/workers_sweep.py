"""Does the input-bound winner gain from more DataLoader workers than CPUs?

    python benchmarks/measurement/workers_sweep.py --adapter adapters/resnet.py \\
        --config best.yaml --workers 16 24 32

Runs the YAML's config with each worker count, in fresh processes exactly as a search trial
measures (diagnosis included), rounds interleaved, and prints per count the median throughput,
the loader's own rate and how busy the CPUs were while timed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import autotune
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import SubprocessRunner


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--workers", type=int, nargs="+", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--measure-seconds", type=float, default=8.0)
    args = p.parse_args()

    base = autotune.load_config(args.config)
    unit = autotune.load_adapter(args.adapter).unit
    runner = SubprocessRunner()
    seen: dict[int, list[autotune.TrialResult]] = {w: [] for w in args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = args.workers if r % 2 == 0 else args.workers[::-1]
            for w in order:
                request = TrialRequest(
                    adapter=args.adapter, config=base.replace(num_workers=w), device=args.device,
                    measure=autotune.MeasureSettings(budget_seconds=args.measure_seconds))
                result = runner.run(request, Path(tmp) / f"r{r}-w{w}", timeout=300)
                seen[w].append(result)
                cpu = result.extra.get("host_cpu") or {}
                print(f"round {r + 1}, {w} workers: {result.status.value} "
                      f"{result.throughput or 0:,.0f} {unit}/s, CPU busy "
                      f"{cpu.get('busy_fraction', float('nan')):.0%}", flush=True)
    print(f"| workers | median {unit}/s | runs | loader alone | CPU busy | CPU steal |")
    print("|---|---|---|---|---|---|")
    for w, results in seen.items():
        ok = [x for x in results if x.throughput]
        if not ok:
            print(f"| {w} | - | {', '.join(x.status.value for x in results)} | | | |")
            continue
        loader = [x.extra["diagnosis"]["loader_rate"] for x in ok if "diagnosis" in x.extra]
        cpu = [x.extra["host_cpu"] for x in ok if "host_cpu" in x.extra]
        cells = [
            f"{statistics.median(x.throughput for x in ok):,.0f}",
            ", ".join(f"{x.throughput:,.0f}" for x in ok),
            f"{statistics.median(loader):,.0f}" if loader else "",
            f"{statistics.median(c['busy_fraction'] for c in cpu):.0%}" if cpu else "",
            f"{statistics.median(c['steal_fraction'] for c in cpu):.1%}" if cpu else "",
        ]
        print(f"| {w} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
