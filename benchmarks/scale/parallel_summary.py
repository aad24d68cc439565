"""results/h200x2/parallel.json from the 2-GPU runs: configurations per minute on 1 and 2 GPUs
(`gpu_multi.sh`), the 1-rank and 2-rank DDP searches and knob sweep (`gpu_ddp.sh`), and the
same-config pairs (`ddp_pairs.py`).

    python3 benchmarks/scale/parallel_summary.py --multi gpu_multi.json --ddp ddp.json \\
        --pairs ddp-pairs.json --out parallel.json

`ddp_scaling_efficiency` is the 2-rank search winner's config measured as 1 process and as 2
ranks, alternating (the ranks' own scaling); the two searches' winners divided
(`search_winners_ratio`) also carry how far each search got in its budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--multi", type=Path, required=True)
    parser.add_argument("--ddp", type=Path, required=True)
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    multi = json.loads(args.multi.read_text())
    ddp = json.loads(args.ddp.read_text())
    pairs = json.loads(args.pairs.read_text())
    nproc = ddp["nproc_per_node"]
    winner = ddp[f"best_{nproc}rank_config"]
    same = next((c for c in pairs["configs"] if c["config"] == winner), None)
    if same is None:
        print("the pairs do not hold the N-rank winner's config", file=sys.stderr)
        return 1
    doc: dict[str, Any] = {
        "trials_per_minute_1gpu": multi["trials_per_minute_1gpu"],
        "trials_per_minute_2gpu": multi["trials_per_minute_2gpu"],
        "trials_per_minute_ratio": multi["trials_per_minute_ratio"],
        "ddp_scaling_efficiency": same["scaling_efficiency"],
        "ddp_scaling_efficiency_what": "the 2-rank search winner's config as 1 plain process and "
                                       "as 2 DDP ranks, alternating fresh runs: median 2-rank "
                                       "global rate / (2 x median 1-process rate)",
        "ddp_scaling_efficiency_per_config": {c["config_from"]: c["scaling_efficiency"]
                                              for c in pairs["configs"]},
        "best_1rank": ddp["best_1rank"],
        "best_2rank": ddp[f"best_{nproc}rank"],
        "search_winners_ratio": ddp["ddp_scaling_efficiency"],
        "baseline_scaling_efficiency": ddp["baseline_scaling_efficiency"],
        "best_1rank_config": ddp["best_1rank_config"],
        "best_2rank_config": winner,
        "ddp_knob_sweep": ddp.get("knob_sweep"),
        "multi_gpu_runs": multi["runs"],
        "adapter": multi["adapter"], "space": multi["space"],
        "budget_seconds": multi["budget_seconds"],
        "device": f"{multi['gpus_visible']}x {multi['device']}",
        "torch": multi["torch"],
        "date": multi["date"][:10],
        "dates": {"multi": multi["date"], "ddp": ddp["date"], "pairs": pairs["date"]},
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in list(doc)[:9]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
