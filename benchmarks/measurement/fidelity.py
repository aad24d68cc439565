"""Fidelity: does autotune's short windowed estimate predict a long plain training run?

    python benchmarks/measurement/fidelity.py --adapter adapters/gpt.py \\
        --config results/h100/search/gpt/best.yaml

Runs the tool's trial measurement `--repeats` times (fresh processes, exactly as a search trial
measures), then `benchmarks/measurement/long_run.py` once for `--seconds` under `autotune apply`
(a plain loop with no autotune measurement code), and prints the relative error of the median
estimate and the repeat-to-repeat spread of the estimates. Writes a JSON file when --json is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import autotune
from autotune.contract.request import TrialRequest
from autotune.contract.stats import relative_spread
from autotune.study.execution.runner import SubprocessRunner

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeats", type=int, default=3, help="estimates, each a fresh process")
    p.add_argument("--measure-seconds", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=30.0, help="long run: seconds not counted")
    p.add_argument("--seconds", type=float, default=180.0, help="long run: seconds counted")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()

    config = autotune.load_config(args.config)
    unit = autotune.load_adapter(args.adapter).unit
    runner = SubprocessRunner()
    estimates = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            request = TrialRequest(adapter=args.adapter, config=config, device=args.device,
                                   diagnose=False,
                                   measure=autotune.MeasureSettings(budget_seconds=args.measure_seconds))
            result = runner.run(request, Path(tmp) / f"estimate{i}", timeout=600)
            if result.throughput is None:
                print(f"estimate {i}: {result.status.value} {result.reason}", file=sys.stderr)
                return 1
            estimates.append(result)
            print(f"estimate {i + 1}/{args.repeats}: {result.throughput:,.0f} {unit}/s "
                  f"(spread {result.spread:.1%}, converged {result.converged}, "
                  f"{result.windows} windows)", flush=True)
    long = subprocess.run(
        [sys.executable, "-m", "autotune", "apply", args.config, "--", sys.executable,
         str(HERE / "long_run.py"), "--adapter", args.adapter, "--config", args.config,
         "--device", args.device, "--warmup", str(args.warmup), "--seconds", str(args.seconds)],
        capture_output=True, text=True, check=False,
    )
    if long.returncode != 0:
        print(long.stdout, long.stderr, file=sys.stderr)
        return 1
    reference = json.loads(long.stdout.strip().splitlines()[-1])
    values = [r.throughput for r in estimates]
    median = statistics.median(values)
    error = (median - reference["throughput"]) / reference["throughput"]
    fp = estimates[0].fingerprint
    summary = {
        "adapter": args.adapter,
        "config": args.config,
        "unit": unit,
        "estimates": values,
        "estimate_median": median,
        "estimate_spread": relative_spread(values),
        "estimate_windows": [list(r.window_throughputs) for r in estimates],
        "estimate_converged": [r.converged for r in estimates],
        "long_run": reference,
        "relative_error": error,
        "device": fp and (fp.gpu or fp.cpu_model),
        "torch": fp and fp.torch,
        "date": fp and fp.date,
    }
    print(f"long run: {reference['throughput']:,.0f} {unit}/s over {reference['seconds']:.0f} s "
          f"({reference['steps']} steps)")
    print(f"FIDELITY {Path(args.adapter).stem}: estimate {median:,.0f} {unit}/s, error {error:+.2%}, "
          f"repeat spread {summary['estimate_spread']:.2%} ({summary['device']}, torch "
          f"{summary['torch']}, {summary['date']})")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
