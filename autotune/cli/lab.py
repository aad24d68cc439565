"""`autotune lab`: defaults, recipes and a tuned YAML side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from autotune.cli.common import check_writable, positive, resolve_device


def add_parser(sub: argparse._SubParsersAction) -> None:
    lab = sub.add_parser(
        "lab", help="run defaults, bf16, bf16+compile, the hand recipe and a YAML side by side",
        description="The tuning guides' lab, interleaved and repeated: five rows, (1) PyTorch "
        "defaults, (2) + bf16 autocast, (3) + bf16 + torch.compile, (4) the common hand recipe, "
        "(5) the YAML given with --config (four rows without it). Each run is a fresh process.",
    )
    lab.add_argument("--adapter", required=True, type=Path, help="the adapter file")
    lab.add_argument("--config", type=Path, default=None, help="a tuned YAML (best.yaml) for row 5")
    lab.add_argument("--repeats", type=positive(int), default=3,
                     help="runs of each row, order rotated between rounds (default 3)")
    lab.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    lab.add_argument("--out", type=Path, default=None,
                     help="folder for lab.json, lab.md and the runs (default: results/ADAPTER-lab)")
    lab.add_argument("--trial-timeout", type=positive(float), default=300.0,
                     help="seconds one run may take, compile apart: a compiled row may take as "
                          "long again compiling (default 300)")
    lab.add_argument("--measure-seconds", type=positive(float), default=15.0,
                     help="most seconds of timed windows per run (default 15)")
    lab.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autotune.adapter import load_adapter
    from autotune.contract.config import read_config
    from autotune.contract.fmt import human
    from autotune.contract.host import available_cpus
    from autotune.contract.request import MeasureSettings
    from autotune.contract.result import Fingerprint
    from autotune.lab import (lab_rows, next_steps, noise_warnings, run_lab, save, summarize,
                              to_markdown)
    from autotune.outputs.display import make_console
    from autotune.study.execution.runner import SubprocessRunner

    device = resolve_device(args.device)
    adapter = load_adapter(args.adapter)
    tuned = read_config(args.config) if args.config else None
    out = args.out or Path("results") / f"{args.adapter.stem}-lab"
    check_writable(out)
    rows = lab_rows(adapter, device=device, cpus=available_cpus(), tuned=tuned)
    console = make_console()  # piped: lines unwrapped
    console.print(f"[bold]autotune lab[/] {args.adapter} on {device}: {len(rows)} rows x "
                  f"{args.repeats} repeats, each a fresh process")
    for row in rows:
        console.print(f"  {row.index}. {row.name}: {row.config.describe()}")
    if tuned is not None:
        from autotune.outputs.batch_note import batch_change

        # Rows 1-4 train the adapter's effective batch; a YAML found with
        # --vary-global-batch may not, and then its row computes a different step.
        note = batch_change(tuned, rows[0].config.effective_batch)
        if note is not None:
            console.print(f"[bold yellow]note:[/] row 5: {note}")
    runner = SubprocessRunner()

    def report(row: object, rep: int, result: object) -> None:
        value = f"{human(result.throughput)} {adapter.unit}/s" if result.throughput else \
            f"{result.status.value}: {result.reason}"
        console.print(f"  round {rep + 1}, row {row.index}: {value}")

    results = run_lab(rows, adapter_path=args.adapter, device=device, runner=runner, out=out,
                      repeats=args.repeats, trial_timeout=args.trial_timeout,
                      measure=MeasureSettings(budget_seconds=args.measure_seconds),
                      on_result=report)
    flops = adapter().flops_per_item()
    peak = None
    if device == "cuda" and flops:
        from autotune.trial.ceiling import bf16_matmul_flops

        peak = bf16_matmul_flops()
        console.print(f"measured bf16 matmul ceiling: {peak / 1e12:.0f} TFLOP/s (8192^3, random data)")
    table = summarize(rows, results, flops_per_item=flops, peak_flops=peak)
    fp = next((r.fingerprint for rs in results.values() for r in rs if r.fingerprint),
              Fingerprint())
    meta = {"adapter": str(args.adapter), "config": str(args.config) if args.config else None,
            "device": fp.gpu or f"cpu ({fp.cpu_model})", "torch": fp.torch,
            "date": fp.date, "repeats": args.repeats,
            "bf16_matmul_tflops": round(peak / 1e12, 1) if peak else None}
    save(table, out, unit=adapter.unit, meta=meta)
    console.print(to_markdown(table, unit=adapter.unit))
    for warning in noise_warnings(rows, results, unit=adapter.unit):
        console.print(f"[bold yellow]warning:[/] {warning}")
    console.print(f"wrote {out}/lab.md and {out}/lab.json")
    for line in next_steps(args.adapter, args.config):
        console.print(line, markup=False, highlight=False)
    return 0 if all(t["throughput"] for t in table) else 1
