"""`autotune check`: a performance gate for CI. Thin: the flags, then `autotune.check.run`."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import textwrap
from pathlib import Path

from autotune.cli.common import positive

# Exit codes (autotune.check.verdict.ExitCode): 0 the rate holds, 1 a regression the runs agree
# on, 2 no comparison (bad input, another device, torch or unit, no ok run), 128 + the signal
# when interrupted (130 for Ctrl-C).
CANNOT_COMPARE = 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        "check", help="re-run best.yaml's config and fail on a slowdown (a CI gate)",
        description="Run the config of best.yaml (or of a baseline file) in fresh processes, as "
        "a search's confirmation does, and compare the median with the stored throughput. Exit "
        "0: the rate holds; 1: slower by more than --threshold in runs that agree on it; 2: "
        "no comparison (bad input, another device, torch version or unit, no run ok); 130: "
        "interrupted (nothing written).",
    )
    check.usage_status = CANNOT_COMPARE  # a usage error is no regression: exit 2, not 1
    check.add_argument("--adapter", required=True, type=Path,
                       help="the adapter file (the same one, changed or not, the config was "
                       "tuned for)")
    check.add_argument("--against", required=True, type=Path,
                       help="best.yaml (its confirmed throughput) or a baseline file written "
                       "by --update")
    check.add_argument("--runs", type=positive(int), default=3,
                       help="fresh runs of the config (default 3)")
    check.add_argument("--threshold", type=positive(float), default=0.05,
                       help="a slowdown beyond this fraction fails the check (default 0.05)")
    check.add_argument("--update", type=Path, default=None, metavar="BASELINE.json",
                       help="measure on this machine and write the runs here as the baseline "
                       "(no comparison; exit 0), e.g. once on the CI runner")
    check.add_argument("--allow-torch-change", action="store_true",
                       help="compare even when the baseline was measured with another torch "
                       "version")
    check.add_argument("--measure-seconds", type=positive(float), default=20.0,
                       help="most seconds of timed windows per run, as a confirmation run "
                       "(default 20)")
    check.add_argument("--tolerance", type=positive(float), default=0.02,
                       help="a run stops timing once its median is known to +-this fraction "
                       "(default 0.02)")
    check.add_argument("--run-timeout", type=positive(float), default=300.0,
                       help="seconds one run may take, start-up and compile included "
                       "(default 300)")
    check.add_argument("--json", action="store_true",
                       help="print the result as one JSON object (progress goes to stderr)")
    check.set_defaults(func=functools.partial(run, parser=check))


def run(args: argparse.Namespace, *, parser: argparse.ArgumentParser) -> int:
    from autotune.check.run import CheckSettings, run_check
    from autotune.study.settings import confirm_measurement

    for flag, value in (("--threshold", args.threshold), ("--tolerance", args.tolerance)):
        if value >= 1:
            parser.error(f"{flag} {value}: must be a fraction below 1, e.g. 0.05")
    settings = CheckSettings(
        adapter=args.adapter, against=args.against, runs=args.runs, threshold=args.threshold,
        measure=confirm_measurement(budget_seconds=args.measure_seconds,
                                    tolerance=args.tolerance),
        run_timeout=args.run_timeout, allow_torch_change=args.allow_torch_change,
        update=args.update)
    outcome = run_check(settings, progress=lambda text: print(text, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=1))
    else:
        stream = sys.stdout if outcome.code < CANNOT_COMPARE else sys.stderr
        print(outcome.line, file=stream)
        for note in outcome.notes:
            print(textwrap.indent(note, "  "), file=stream)
    return int(outcome.code)
