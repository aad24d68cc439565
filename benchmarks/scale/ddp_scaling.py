"""DDP scaling on one host: a 1-rank and an N-rank search of the same adapter, space and budget,
compared; then the N-rank winner re-measured with each DDP knob changed alone.

    python3 benchmarks/scale/ddp_scaling.py --one OUT/1rank --many OUT/2rank \\
        --adapter adapters/gpt.py --nproc 2 --sweep-seconds 10 --out OUT

Scaling efficiency = N-rank throughput / (N x 1-rank throughput), twice: for the searches'
winners (each the best its layout found) and for their baselines (trial 0, the same config:
PyTorch's defaults at the adapter's per-rank batch). Writes OUT/ddp.json and, with matplotlib,
OUT/ddp-knobs.png (the knob sweep).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.contract.config import TrainConfig, read_config  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status  # noqa: E402
from autotune.study.execution.ddp_runner import DDPRunner  # noqa: E402

# One knob changed at a time from the winner (bucket sizes as in search_spaces/default.yaml).
VARIANTS: dict[str, dict[str, Any]] = {
    "bucket_cap_mb=default": {"bucket_cap_mb": None},
    "bucket_cap_mb=10": {"bucket_cap_mb": 10},
    "bucket_cap_mb=50": {"bucket_cap_mb": 50},
    "bucket_cap_mb=100": {"bucket_cap_mb": 100},
    "gradient_as_bucket_view flipped": {"gradient_as_bucket_view": None},
    "static_graph flipped": {"static_graph": None},
}


def best_rate(folder: Path) -> tuple[float | None, dict[str, Any]]:
    doc = yaml.safe_load((folder / "best.yaml").read_text())
    return (doc.get("throughput") or {}).get("value"), doc.get("config") or {}


def baseline_rate(folder: Path) -> float | None:
    with (folder / "trials.csv").open() as f:
        for row in csv.DictReader(f):
            if row.get("baseline") == "True" and row.get("status") == "ok":
                return float(row["throughput"])
    return None


def efficiency(many: float | None, one: float | None, nproc: int) -> float | None:
    return many / (nproc * one) if many and one else None


def sweep(adapter: str, winner: TrainConfig, nproc: int, seconds: float, out: Path,
          cache: Path, device: str) -> dict[str, float | str]:
    """The winner and each variant, once each, then the winner again (the drift between its
    two runs is the noise the differences must exceed)."""
    runner = DDPRunner(nproc_per_node=nproc, cache_dir=cache)
    settings = MeasureSettings(window_seconds=1.0, budget_seconds=seconds, tolerance=0.02)
    configs: list[tuple[str, TrainConfig]] = [("winner", winner)]
    for name, change in VARIANTS.items():
        key, value = next(iter(change.items()))
        if value is None and key != "bucket_cap_mb":
            value = not getattr(winner, key)
        config = winner.replace(**{key: value})
        if config != winner:
            configs.append((name, config))
    configs.append(("winner again", winner))
    rates: dict[str, float | str] = {}
    for i, (name, config) in enumerate(configs):
        request = TrialRequest(adapter=adapter, config=config, device=device, measure=settings,
                               number=i)
        result = runner.run(request, out / "knobs" / str(i), timeout=300)
        rates[name] = result.throughput if result.status is Status.OK and result.throughput \
            else f"{result.status.value}: {result.reason}"
        print(f"  {name:34s} {rates[name]}", flush=True)
    return rates


def plot(rates: dict[str, float | str], path: Path, unit: str) -> None:
    """Each variant's rate against the winner's (the mean of its two runs), in percent, with the
    drift between those two runs shaded: a difference inside it is noise."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure (pip install matplotlib)")
        return
    names = [n for n, r in rates.items() if isinstance(r, float)]
    runs = [float(rates[n]) for n in ("winner", "winner again") if isinstance(rates.get(n), float)]
    if not runs:
        print("the winner did not run ok: no figure")
        return
    ref = sum(runs) / len(runs)
    drift = 100 * (max(runs) - min(runs)) / ref / 2
    change = [100 * (float(rates[n]) / ref - 1) for n in names]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.8))
    ax.axvspan(-drift, drift, color="0.85", label=f"winner's own drift (±{drift:.2f}%)")
    ax.barh(names, change, color=["tab:green" if n.startswith("winner") else "tab:blue"
                                  for n in names])
    for y, (n, c) in enumerate(zip(names, change)):
        ax.annotate(f"{c:+.2f}%  ({float(rates[n]) / 1e3:.1f}k)", (c, y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(f"change against the winner ({ref / 1e3:.1f}k global {unit}/s), %")
    ax.set_title("DDP knobs, one at a time from the winner (fresh runs, in this order)")
    ax.legend(loc="lower right", fontsize=8)
    lo, hi = min(change + [-drift]), max(change + [drift])
    ax.set_xlim(lo - 0.5, hi + 1.5)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--one", type=Path, required=True, help="the 1-rank search's --out")
    parser.add_argument("--many", type=Path, required=True, help="the N-rank search's --out")
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (gloo ranks)")
    parser.add_argument("--sweep-seconds", type=float, default=0.0,
                        help="timed seconds per knob-sweep run (0: no sweep)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    one_best, one_config = best_rate(args.one)
    many_best, many_config = best_rate(args.many)
    doc: dict[str, Any] = {
        "nproc_per_node": args.nproc,
        "best_1rank": one_best, "best_1rank_config": one_config,
        f"best_{args.nproc}rank": many_best, f"best_{args.nproc}rank_config": many_config,
        "ddp_scaling_efficiency": efficiency(many_best, one_best, args.nproc),
        "baseline_1rank": baseline_rate(args.one),
        f"baseline_{args.nproc}rank": baseline_rate(args.many),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    doc["baseline_scaling_efficiency"] = efficiency(doc[f"baseline_{args.nproc}rank"],
                                                    doc["baseline_1rank"], args.nproc)
    print(f"best: 1 rank {one_best}, {args.nproc} ranks {many_best}: scaling efficiency "
          f"{doc['ddp_scaling_efficiency']}")
    print(f"baseline (same config): scaling efficiency {doc['baseline_scaling_efficiency']}")
    if args.sweep_seconds > 0:
        print("DDP knobs, one at a time from the winner:")
        started = time.monotonic()
        winner = read_config(args.many / "best.yaml")
        doc["knob_sweep"] = sweep(args.adapter, winner, args.nproc, args.sweep_seconds,
                                  args.out, args.many / "compile-cache", args.device)
        doc["knob_sweep_seconds"] = round(time.monotonic() - started)
        unit = (yaml.safe_load((args.many / "best.yaml").read_text()).get("throughput")
                or {}).get("unit", "items/s").removesuffix("/s")
        plot(doc["knob_sweep"], args.out / "ddp-knobs.png", unit)
    (args.out / "ddp.json").write_text(json.dumps(doc, indent=2, default=str))
    print(f"wrote {args.out / 'ddp.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
