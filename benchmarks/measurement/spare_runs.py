"""What starting each confirmation run one run ahead saves, side by side with plain fresh runs.

    python benchmarks/measurement/spare_runs.py --adapter adapters/mlp.py [--device cpu] [--runs 4]
        [--rounds 2] [--compile none] [--json results/cpu/spare-runs/hf_text.json]

A confirmation is a sequence of fresh runs. This runs the same config as `--runs` fresh runs in a
row, once with plain fresh processes (`SubprocessRunner`) and once with spare processes
(`SpareRunner`, `autotune.study.execution.spare_runner`), alternating which goes first over
`--rounds` rounds (drift on the machine hits both alike). Per kind it reports each run's overhead:
its wall seconds, from the runner's launch to its end, less warm-up (compile included), windows and
diagnosis, the part a spare's start-up can hide, after the first run of a sequence (the first has
no run before it). And the median rate: a spare is stopped while the run before it measures, so the
rates should not move. Measurement lengths vary with the machine's noise (windows run until the
median is known); the overheads do not depend on them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.contract.config import TrainConfig  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402
from autotune.study.execution.spare_runner import SpareRunner  # noqa: E402

# The search's confirmation windows (study/settings.py: confirm_measurement), with a shorter
# budget: the measurement's length is not what this compares.
CONFIRM_MEASURE = MeasureSettings(window_seconds=1.0, budget_seconds=5.0, tolerance=0.02)
MEASURED = ("warmup", "windows", "diagnosis")


def sequence(kind: str, adapter: Path, config: TrainConfig, device: str, runs: int,
             work: Path, cache: Path) -> dict[str, Any]:
    runner: SubprocessRunner = (SpareRunner(log=work / "spares.log", cache_dir=cache)
                                if kind == "spare" else SubprocessRunner(cache_dir=cache))
    seconds, overhead, rates = [], [], []
    start = time.monotonic()
    try:
        for i in range(runs):
            request = TrialRequest(adapter=str(adapter), config=config, device=device,
                                   measure=CONFIRM_MEASURE, number=i, diagnose=False)
            result = runner.run(request, work / f"{kind}-{i}", timeout=600)
            if result.status is not Status.OK:
                raise SystemExit(f"{kind} run {i}: {result.status.value} {result.reason}")
            seconds.append(result.duration_seconds or 0.0)
            overhead.append(seconds[-1] - sum(result.phases.get(p, 0.0) for p in MEASURED))
            rates.append(result.throughput or 0.0)
    finally:
        runner.close()
    return {"total_seconds": time.monotonic() - start, "seconds": seconds,
            "overhead": overhead, "rates": rates}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", type=Path, required=True)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--compile", default="none")
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    from autotune.adapter import load_adapter

    adapter_cls = load_adapter(args.adapter)
    config = TrainConfig(batch_size=args.batch_size or adapter_cls.batch_size,
                         compile=args.compile)
    kinds: dict[str, list[dict[str, Any]]] = {"plain": [], "spare": []}
    with tempfile.TemporaryDirectory() as tmp:
        # One compile before timing anything: both kinds then meet a warm compile cache (one
        # cache for all sequences, as a search's confirmation runs share the study's).
        cache = Path(tmp) / "cache"
        sequence("plain", args.adapter, config, args.device, 1, Path(tmp) / "warm", cache)
        for r in range(args.rounds):
            order = ("plain", "spare") if r % 2 == 0 else ("spare", "plain")
            for kind in order:
                work = Path(tmp) / f"round{r}"
                work.mkdir(exist_ok=True)
                kinds[kind].append(sequence(kind, args.adapter, config, args.device, args.runs,
                                            work, cache))
                s = kinds[kind][-1]
                print(f"round {r} {kind}: {s['total_seconds']:.1f} s for {args.runs} runs "
                      f"({', '.join(f'{x:.1f}' for x in s['seconds'])}); overhead "
                      f"{', '.join(f'{x:.2f}' for x in s['overhead'])}", flush=True)
    summary: dict[str, Any] = {"adapter": str(args.adapter), "device": args.device,
                               "config": config.to_dict(), "runs": args.runs,
                               "rounds": args.rounds}
    for kind, seqs in kinds.items():
        summary[kind] = {
            "sequence_seconds": [round(s["total_seconds"], 2) for s in seqs],
            "overhead_seconds": [[round(x, 2) for x in s["overhead"]] for s in seqs],
            "median_overhead_after_first": round(
                statistics.median(x for s in seqs for x in s["overhead"][1:]), 2),
            "median_rate": statistics.median(x for s in seqs for x in s["rates"]),
        }
    summary["overhead_saved_per_run"] = round(
        summary["plain"]["median_overhead_after_first"]
        - summary["spare"]["median_overhead_after_first"], 2)
    summary["rate_ratio"] = round(summary["spare"]["median_rate"] / summary["plain"]["median_rate"], 3)
    import torch

    summary["torch"] = torch.__version__
    summary["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
