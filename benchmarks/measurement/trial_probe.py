"""One search trial per config, in a fresh process as a search runs it: its warm-up steps and
seconds, each phase's seconds, its rate and its diagnosis (the loader-alone rate, the verdict).

    python3 benchmarks/measurement/trial_probe.py --adapter adapters/x.py a.yaml b.yaml

Each YAML holds knobs (TrainConfig's fields). The trial is timed as a search times it
(`--measure-seconds`, the search's default 5) and may take `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

from autotune import TrainConfig
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import SubprocessRunner
from autotune.study.settings import search_measurement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--measure-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=90.0)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="trial-probe-"))
    for i, path in enumerate(args.configs):
        config = TrainConfig(**yaml.safe_load(path.read_text()))
        request = TrialRequest(adapter=args.adapter, config=config, device=args.device,
                               measure=search_measurement(budget_seconds=args.measure_seconds,
                                                          tolerance=0.05), number=i)
        r = SubprocessRunner().run(request, folder / str(i), timeout=args.timeout)
        print(json.dumps({"config": str(path), "describe": config.describe(),
                          "status": r.status.value, "reason": r.reason,
                          "throughput": r.throughput, "spread": r.spread,
                          "loader_rate": r.diagnosis.loader_rate if r.diagnosis else None,
                          "verdict": r.diagnosis.verdict.value if r.diagnosis else None,
                          "warmup_steps": r.warmup_steps, "warmup_seconds": r.warmup_seconds,
                          "phases": {k: round(v, 2) for k, v in r.phases.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
