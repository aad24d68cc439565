"""DDP scaling of one config at a time: the same config as one plain process and as N DDP ranks,
alternating in fresh processes, so the efficiency is the ranks' own and not two searches'.

    python3 benchmarks/scale/ddp_pairs.py --adapter adapters/gpt.py --config A/best.yaml \\
        --config B/best.yaml --nproc 2 --repeats 2 --seconds 5 --out OUT

Scaling efficiency = median N-rank global rate / (N x median 1-process rate), per config. The
config (micro-batch, workers, ...) is each rank's: N ranks train N times the items per step
(weak scaling, what a DDP job on the host does). Writes OUT/ddp-pairs.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.contract.config import read_config  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status  # noqa: E402
from autotune.study.execution.ddp_runner import DDPRunner  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402


def write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    doc = {
        "what": "the same per-rank config as 1 plain process and as N DDP ranks, alternating "
                "fresh runs; efficiency = median N-rank global rate / (N x median 1-process rate)",
        "adapter": args.adapter, "nproc_per_node": args.nproc, "repeats": args.repeats,
        "timed_seconds_per_run": args.seconds, "configs": rows,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ddp-pairs.json").write_text(json.dumps(doc, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--config", type=Path, action="append", required=True,
                        help="a best.yaml (or knobs YAML) whose config is measured; repeatable")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per run")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (gloo ranks)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cache = args.out / "compile-cache"  # each config compiles cold once, then hits
    layouts = {1: SubprocessRunner(cache_dir=cache),
               args.nproc: DDPRunner(nproc_per_node=args.nproc, cache_dir=cache)}
    settings = MeasureSettings(window_seconds=1.0, budget_seconds=args.seconds, tolerance=0.02)
    rows: list[dict[str, Any]] = []
    count = 0
    for path in args.config:
        config = read_config(path)
        rates: dict[int, list[float]] = {n: [] for n in layouts}
        failures: list[str] = []
        for rep in range(args.repeats):
            for n, runner in layouts.items():  # alternating: drift hits both alike
                request = TrialRequest(adapter=args.adapter, config=config, device=args.device,
                                       measure=settings, number=count, diagnose=False)
                result = runner.run(request, args.out / "runs" / f"{count:02d}-{n}rank",
                                    timeout=300)
                count += 1
                if result.status is Status.OK and result.throughput:
                    rates[n].append(result.throughput)
                    print(f"{path}: {n} rank(s), run {rep + 1}: {result.throughput:.6g}/s",
                          flush=True)
                else:
                    failures.append(f"{n} rank(s): {result.status.value}: {result.reason}")
                    print(f"{path}: {n} rank(s), run {rep + 1}: {failures[-1]}", flush=True)
        one = statistics.median(rates[1]) if rates[1] else None
        many = statistics.median(rates[args.nproc]) if rates[args.nproc] else None
        rows.append({
            "config_from": str(path), "config": config.to_dict(),
            "rates_1rank": rates[1], f"rates_{args.nproc}rank": rates[args.nproc],
            "median_1rank": one, f"median_{args.nproc}rank": many,
            "scaling_efficiency": many / (args.nproc * one) if one and many else None,
            "failures": failures,
        })
        print(f"{path}: scaling efficiency {rows[-1]['scaling_efficiency']}", flush=True)
        write(args, rows)  # after each config: a run cut short keeps what it measured
    print(f"wrote {args.out / 'ddp-pairs.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
