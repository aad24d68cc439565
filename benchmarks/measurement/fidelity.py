"""Fidelity: does autotune's short windowed estimate predict a long plain training run?

    python benchmarks/measurement/fidelity.py --adapter adapters/gpt.py \\
        --config results/h100/search/gpt/best.yaml

Runs the tool's trial measurement `--repeats` times (fresh processes, exactly as a search trial
measures) and `benchmarks/measurement/long_run.py` `--long-runs` times for `--seconds` under
`autotune apply` (a plain loop with no autotune measurement code), the i-th long run right after
the i-th estimate, and prints the relative error of the median estimate against the median long
run and the repeat-to-repeat spread of the estimates. Writes a JSON file when --json is given.

A host whose rate drifts during the call biases an estimate read before its long run. On the
H100 an input-bound config fell 11.3k -> 8.8k images/s over 6 minutes, and E L E L E L read
every estimate 2-4% above the long run after it. With one estimate more than long runs
(`--repeats 4 --long-runs 3`: E L E L E L E) every long run sits between two estimates: the
medians stand at the same moment under a steady drift, and each long run is also compared with
the mean of the estimates either side of it (`bracketed_errors`, and their median).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
    p.add_argument("--long-runs", type=int, default=1, help="long runs, between the estimates")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    if args.repeats < 1 or args.long_runs < 1:
        p.error("--repeats and --long-runs must be at least 1")

    config = autotune.load_config(args.config)
    unit = autotune.load_adapter(args.adapter).unit
    runner = SubprocessRunner()
    estimates: list[Any] = []
    longs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(max(args.repeats, args.long_runs)):
            if i < args.repeats:
                request = TrialRequest(
                    adapter=args.adapter, config=config, device=args.device, diagnose=False,
                    measure=autotune.MeasureSettings(budget_seconds=args.measure_seconds))
                result = runner.run(request, Path(tmp) / f"estimate{i}", timeout=600)
                if result.throughput is None:
                    print(f"estimate {i}: {result.status.value} {result.reason}", file=sys.stderr)
                    return 1
                estimates.append(result)
                print(f"estimate {i + 1}/{args.repeats}: {result.throughput:,.0f} {unit}/s "
                      f"(spread {result.spread:.1%}, converged {result.converged}, "
                      f"{result.windows} windows)", flush=True)
            if i < args.long_runs:
                run = _long_run(args)
                if run is None:
                    return 1
                longs.append(run)
                print(f"long run {i + 1}/{args.long_runs}: {run['throughput']:,.0f} {unit}/s over "
                      f"{run['seconds']:.0f} s ({run['steps']} steps; slices "
                      f"{', '.join(f'{v:,.0f}' for v in run.get('slices', []))})", flush=True)
    reference = {"throughput": statistics.median(r["throughput"] for r in longs), "runs": longs,
                 "seconds": sum(r["seconds"] for r in longs),
                 "steps": sum(r["steps"] for r in longs)}
    values = [r.throughput for r in estimates]
    median = statistics.median(values)
    error = (median - reference["throughput"]) / reference["throughput"]
    bracketed = bracketed_errors(values, [r["throughput"] for r in longs])
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
        "bracketed_errors": bracketed,
        "bracketed_error": statistics.median(bracketed) if bracketed else None,
        "device": fp and (fp.gpu or fp.cpu_model),
        "torch": fp and fp.torch,
        "date": fp and fp.date,
    }
    print(f"FIDELITY {Path(args.adapter).stem}: estimate {median:,.0f} {unit}/s, error {error:+.2%}, "
          f"repeat spread {summary['estimate_spread']:.2%}"
          + (f", each long run against the estimates either side "
             f"{', '.join(f'{e:+.2%}' for e in bracketed)} (median "
             f"{summary['bracketed_error']:+.2%})" if bracketed else "")
          + f" ({summary['device']}, torch "
          f"{summary['torch']}, {summary['date']})")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


def bracketed_errors(estimates: list[float], longs: list[float]) -> list[float]:
    """Each long run i against the mean of estimates i and i+1, the ones run just before and just
    after it (E L E L E ...): a rate drifting steadily during the call cancels in each pair.
    Empty when fewer estimates than long runs + 1 ran."""
    if len(estimates) < len(longs) + 1:
        return []
    return [((estimates[i] + estimates[i + 1]) / 2 - long) / long for i, long in enumerate(longs)]


def _long_run(args: argparse.Namespace) -> dict[str, Any] | None:
    """One long plain run under `autotune apply`: its JSON line, or None (printed) if it failed."""
    long = subprocess.run(
        [sys.executable, "-m", "autotune", "apply", args.config, "--", sys.executable,
         str(HERE / "long_run.py"), "--adapter", args.adapter, "--config", args.config,
         "--device", args.device, "--warmup", str(args.warmup), "--seconds", str(args.seconds)],
        capture_output=True, text=True, check=False,
    )
    if long.returncode != 0:
        print(long.stdout, long.stderr, file=sys.stderr)
        return None
    return dict(json.loads(long.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    sys.exit(main())
