"""One config measured as a forked search trial and as a fresh process, side by side.

    python benchmarks/measurement/fork_vs_fresh.py [--adapter adapters/mlp.py] [--device cpu]
        [--runs 4] [--amp bf16] [--compile none]

A search trial is forked from the fork server (`ForkServerRunner`); a confirmation run, like a
production run, is a fresh process (`SubprocessRunner`). This alternates the two on one config
(`--runs` each, the order flipped every round) with the search's measurement settings and
prints each one's rates and medians: where they differ, the search ranks configs by something
production does not get (see benchmarks/measurement/host_malloc.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.adapter import load_adapter  # noqa: E402
from autotune.contract.config import TrainConfig  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.study.execution.forkserver import ForkServerRunner  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402

# The search's measurement (study/settings.py: search_measurement with the CLI's defaults).
SEARCH_MEASURE = MeasureSettings(window_seconds=0.5, budget_seconds=5.0, tolerance=0.05)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", default="adapters/mlp.py")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--amp", default="fp32")
    p.add_argument("--compile", default="none")
    args = p.parse_args(argv)
    config = TrainConfig(batch_size=load_adapter(args.adapter).batch_size, amp_dtype=args.amp,
                         compile=args.compile)
    rates: dict[str, list[float]] = {"forked": [], "fresh": []}
    with tempfile.TemporaryDirectory() as tmp:
        runners = {"forked": ForkServerRunner(log=Path(tmp) / "forkserver.log",
                                              cache_dir=Path(tmp) / "cache"),
                   "fresh": SubprocessRunner(cache_dir=Path(tmp) / "cache")}
        try:
            for i in range(args.runs):
                order = ("forked", "fresh") if i % 2 == 0 else ("fresh", "forked")
                for kind in order:
                    request = TrialRequest(adapter=args.adapter, config=config,
                                           device=args.device, measure=SEARCH_MEASURE,
                                           number=i, diagnose=False)
                    result = runners[kind].run(request, Path(tmp) / f"{kind}-{i}", timeout=300)
                    rates[kind].append(result.throughput or 0.0)
        finally:
            runners["forked"].close()  # type: ignore[attr-defined]
    print(f"{args.adapter} {config.describe()} on {args.device}:")
    for kind, values in rates.items():
        print(f"  {kind:6s} median {statistics.median(values):8.0f}/s  "
              f"({', '.join(f'{v:.0f}' for v in values)})")
    print(f"  forked / fresh: {statistics.median(rates['forked']) / statistics.median(rates['fresh']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
