"""Measure every config of a (small) search space: the grid the replay benchmark searches.

    python benchmarks/search/grid.py --adapter adapters/tinyblocks.py \
        --space benchmarks/grids/launch.yaml --out results/h100/grids/tinyblocks.json \
        [--device cuda] [--trial-timeout 120]

Each cell runs the way a search trial runs (forked from the warm server, the search's
measurement settings, diagnosis included) and records its whole result: throughput, status
(an OOM included), compile, start, compose, warm-up and window seconds. Cells are run in
batch-size order within each memory group, so a batch at least as large as one that ran out of
memory is recorded as an implied OOM without running. The JSON is rewritten after every cell.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml  # noqa: E402

from autotune.adapter import load_adapter  # noqa: E402
from autotune.contract.config import KNOBS, TrainConfig  # noqa: E402
from autotune.contract.files import atomic_write_text  # noqa: E402
from autotune.contract.host import available_cpus  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest, known_incompatible  # noqa: E402
from autotune.contract.result import Status, TrialResult  # noqa: E402
from autotune.study.execution.forkserver import ForkServerRunner  # noqa: E402
from autotune.study.space.file import load_space  # noqa: E402

# The search's own measurement settings (study/settings.py: search_measurement with the CLI's
# defaults): the grid is what a search trial would see.
SEARCH_MEASURE = MeasureSettings(window_seconds=0.5, budget_seconds=5.0, tolerance=0.05)


def _memory_group(config: object) -> tuple[object, ...]:
    values = config.to_dict()  # type: ignore[attr-defined]
    return tuple(values[s.name] for s in KNOBS if s.memory and s.name != "batch_size")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", type=Path, required=True)
    parser.add_argument("--space", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--trial-timeout", type=float, default=120.0)
    parser.add_argument("--bound", default="", help="compute, input or launch (recorded)")
    parser.add_argument("--vary-global-batch", action="store_true",
                        help="keep every batch factor at grad_accum 1, as the search's flag does")
    parser.add_argument("--resume", action="store_true",
                        help="keep the cells --out already holds and measure only the rest")
    args = parser.parse_args()

    adapter = load_adapter(args.adapter)
    cpus = available_cpus()
    space = load_space(args.space, adapter=adapter, device_type=args.device, cpus=cpus,
                       vary_global_batch=args.vary_global_batch)
    cells = sorted(space.enumerate(), key=lambda c: (str(_memory_group(c)), c.batch_size))
    work = Path(tempfile.mkdtemp(prefix="grid-"))
    runner = ForkServerRunner(log=work / "forkserver.log", cache_dir=work / "compile-cache")
    doc = {
        "adapter": str(args.adapter), "bound": args.bound, "device": args.device,
        "space": yaml.safe_load(args.space.read_text()), "space_file": str(args.space),
        "cpus": cpus, "unit": adapter.unit, "batch_size": adapter.batch_size,
        "global_batch_size": adapter.global_batch_size,
        "vary_global_batch": adapter.vary_global_batch or args.vary_global_batch,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": None, "cells": [],
    }
    done: dict[str, dict[str, object]] = {}
    if args.resume and args.out.is_file():
        old = json.loads(args.out.read_text())
        doc["fingerprint"] = old.get("fingerprint")
        done = _kept_cells(old["cells"])
    oom_at: dict[str, int] = {}
    start = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for i, config in enumerate(cells):
            group = str(_memory_group(config))
            kept = done.get(json.dumps(config.to_dict(), sort_keys=True))
            if kept is not None:
                doc["cells"].append(kept)
                if kept["result"]["status"] == "oom":  # type: ignore[index]
                    oom_at.setdefault(group, config.batch_size)
                continue
            refused = known_incompatible(config, args.device)
            if refused is not None:  # what the search records without running it
                result = TrialResult(status=Status.ERROR, ran=False, reason=f"not run: {refused}")
            elif group in oom_at and config.batch_size >= oom_at[group]:
                result = TrialResult(status=Status.OOM, reason="implied by a smaller batch")
            else:
                request = TrialRequest(adapter=str(args.adapter), config=config,
                                       device=args.device, measure=SEARCH_MEASURE, number=i)
                result = runner.run(request, work / str(i), timeout=args.trial_timeout)
                if result.status is Status.OOM:
                    oom_at[group] = config.batch_size
            if doc["fingerprint"] is None and result.fingerprint is not None:
                doc["fingerprint"] = result.to_dict()["fingerprint"]
            doc["cells"].append({"config": config.to_dict(), "result": result.to_dict()})
            atomic_write_text(args.out, json.dumps(doc, indent=1))
            rate = f"{result.throughput:.4g}" if result.throughput else "-"
            print(f"[{time.monotonic() - start:6.0f} s] {i + 1}/{len(cells)} "
                  f"{result.status.value:8} {rate:>9}  {config.describe()}  "
                  f"({result.duration_seconds or 0:.1f} s)", flush=True)
    finally:
        runner.close()
    return 0


def _kept_cells(cells: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A grid's cells keyed, and written back, as this code writes a config: a grid recorded
    before a knob was added (its cells lack the key) resumed by measuring every cell again. A
    cell whose config names a knob that no longer exists is left to be measured again."""
    kept = {}
    for cell in cells:
        try:
            config = TrainConfig(**cell["config"]).to_dict()
        except (TypeError, ValueError):
            continue
        kept[json.dumps(config, sort_keys=True)] = cell | {"config": config}
    return kept


if __name__ == "__main__":
    sys.exit(main())
