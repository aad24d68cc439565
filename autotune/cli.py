"""`autotune` command line: search, show, lab, export, apply. Thin: parse, check input, call the
library."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from autotune.contract.errors import InputError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 (the project's convention for bad input) and show the help."""

    def error(self, message: str) -> NoReturn:
        self.print_help(sys.stderr)
        self.exit(1, f"\n{self.prog}: error: {message}\n")


def _positive(kind: type) -> object:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**32:  # numpy's and Optuna's seed range
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**32 - 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="autotune",
        description="Find, by measurement, the fastest training configuration for your PyTorch "
        "training step on this machine.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    search = sub.add_parser("search", help="run a study over the search space")
    search.add_argument("--adapter", required=True, type=Path,
                        help="Python file defining one autotune.Adapter subclass")
    search.add_argument("--space", default=None,
                        help="search space: a name in search_spaces/ (default, cpu) or a .yaml path "
                        "(default: 'default' on CUDA, 'cpu' on a CPU)")
    search.add_argument("--trials", type=_positive(int), default=20,
                        help="finished trials the study should hold (default 20; a resumed study "
                        "counts its earlier trials)")
    search.add_argument("--timeout", type=_positive(float), default=None,
                        help="seconds for this run: no trial starts after, and a running one is "
                        "cut at the deadline (default: none)")
    search.add_argument("--trial-timeout", type=_positive(float), default=None,
                        help="seconds one trial may take, start-up and compile included (default "
                        "300, or a quarter of --timeout when that is shorter: a compile mode that "
                        "needs minutes then costs a quarter of the budget once, and the sampler "
                        "learns to avoid it)")
    search.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="where to train (default auto: cuda when available)")
    search.add_argument("--study-name", default=None,
                        help="Optuna study name (default: the adapter file's name)")
    search.add_argument("--storage", default=None,
                        help="Optuna storage URL, a SQLite .db file, or a journal file other "
                        "processes may share (default: OUT/study.db)")
    search.add_argument("--out", type=Path, default=None,
                        help="output folder (default: results/STUDY_NAME)")
    search.add_argument("--seed", type=_seed, default=None, help="sampler seed (0 to 2**32 - 1)")
    search.add_argument("--measure-seconds", type=_positive(float), default=5.0,
                        help="most seconds of timed windows per search trial after warm-up: "
                        "measuring stops earlier once the median is known to "
                        "--search-tolerance (3 windows are always timed; default 5)")
    search.add_argument("--search-tolerance", type=_positive(float), default=0.05,
                        help="search trials stop timing once the median's 95%% confidence "
                        "interval is within +-this fraction (default 0.05: enough to rank and "
                        "prune; the confirmation pins the winner down to --tolerance)")
    search.add_argument("--confirm-measure-seconds", type=_positive(float), default=20.0,
                        help="the same for each confirmation run (default 20)")
    search.add_argument("--confirm", type=int, default=3,
                        help="after the search, re-run this many top configs and the baseline in "
                        "fresh processes; the winner is picked on those runs (default 3; 0 skips)")
    search.add_argument("--confirm-repeats", type=_positive(int), default=2,
                        help="runs of each confirmed config, in shuffled order (default 2)")
    search.add_argument("--tolerance", type=_positive(float), default=0.02,
                        help="confirmation runs stop timing once the median's 95%% confidence "
                        "interval is within +-this fraction of it (default 0.02)")
    search.add_argument("--vary-global-batch", action="store_true",
                        help="let the search change the effective batch (batch_size x "
                        "grad_accum) too; by default every config keeps the adapter's "
                        "(global_batch_size, else batch_size), so training computes the same; "
                        "same as vary_global_batch = True in the adapter")
    search.add_argument("--no-prune", action="store_true",
                        help="measure every trial to the end, even one clearly slower than the "
                        "best so far")
    search.set_defaults(func=_search)

    show = sub.add_parser("show", help="print the top trials of a study's output folder")
    show.add_argument("out", type=Path, help="the --out folder of a search")
    show.add_argument("--top", type=_positive(int), default=10, help="rows to show (default 10)")
    show.set_defaults(func=_show)

    lab = sub.add_parser(
        "lab", help="run defaults, bf16, bf16+compile, the hand recipe and a YAML side by side",
        description="The three-run lab of tuning guides, interleaved and repeated: (1) PyTorch "
        "defaults, (2) + bf16 autocast, (3) + bf16 + torch.compile, (4) the common hand recipe, "
        "(5) the given YAML. Each run is a fresh process.",
    )
    lab.add_argument("--adapter", required=True, type=Path, help="the adapter file")
    lab.add_argument("--config", type=Path, default=None, help="a tuned YAML (best.yaml) for row 5")
    lab.add_argument("--repeats", type=_positive(int), default=3,
                     help="runs of each row, order rotated between rounds (default 3)")
    lab.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    lab.add_argument("--out", type=Path, default=None,
                     help="folder for lab.json, lab.md and the runs (default: results/ADAPTER-lab)")
    lab.add_argument("--trial-timeout", type=_positive(float), default=300.0,
                     help="seconds one run may take, compile included (default 300)")
    lab.add_argument("--measure-seconds", type=_positive(float), default=15.0,
                     help="most seconds of timed windows per run (default 15)")
    lab.set_defaults(func=_lab)

    export = sub.add_parser(
        "export", help="print best.yaml as Hugging Face or Lightning arguments, or shell exports",
        description="Print best.yaml for another trainer: --to hf gives keyword arguments of "
        "transformers.TrainingArguments, --to lightning those of lightning.Trainer and of the "
        "DataLoader, --to env the shell export lines of the allocator settings. Knobs with no "
        "counterpart get a note. YAML by default, or --format json.",
    )
    export.add_argument("config", type=Path, help="best.yaml")
    export.add_argument("--to", required=True, choices=("hf", "lightning", "env"),
                        help="hf (TrainingArguments), lightning (Trainer + DataLoader) or env")
    export.add_argument("--format", choices=("yaml", "json"), default="yaml",
                        help="for hf and lightning (default yaml); env prints shell lines")
    export.set_defaults(func=_export)

    apply = sub.add_parser(
        "apply", help="run a command with a config's allocator environment set",
        description="Run COMMAND with the environment best.yaml asks for (the CUDA allocator "
        "settings only take effect when set before the process starts).",
    )
    apply.add_argument("config", type=Path, help="best.yaml")
    apply.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    apply.set_defaults(func=_apply)
    return parser


def _search(args: argparse.Namespace) -> int:
    from autotune.adapter import load_adapter
    from autotune.contract.request import MeasureSettings
    from autotune.outputs.display import RichDisplay
    from autotune.outputs.report import OutputWriter
    from autotune.study.forkserver import ForkServerRunner
    from autotune.study.runner import SubprocessRunner
    from autotune.study.search import Interrupted, Search, SearchSettings
    from autotune.study.space import find_space, load_space
    from autotune.study.storage import default_storage_url

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the display reports progress
    device = _resolve_device(args.device)
    adapter = load_adapter(args.adapter)
    space_path = find_space(args.space or ("default" if device == "cuda" else "cpu"))
    space = load_space(space_path, adapter=adapter, device_type=device,
                       vary_global_batch=args.vary_global_batch)
    if args.confirm < 0:
        raise InputError(f"--confirm {args.confirm}: must be 0 (no confirmation) or more")
    for flag, value in (("--tolerance", args.tolerance),
                        ("--search-tolerance", args.search_tolerance)):
        if value >= 1:
            raise InputError(f"{flag} {value}: must be a fraction below 1, e.g. 0.02")
    study_name = args.study_name or args.adapter.stem
    out = args.out or Path("results") / study_name
    _check_writable(out)
    settings = SearchSettings(
        adapter=args.adapter,
        space_source=str(space_path),
        device=device,
        out=out,
        storage=args.storage or default_storage_url(out),
        study_name=study_name,
        trials=args.trials,
        timeout=args.timeout,
        trial_timeout=_trial_timeout(args.trial_timeout, args.timeout),
        seed=args.seed,
        # Search-phase windows are shorter than confirmation's: the search ranks, the
        # confirmation reports.
        measure=MeasureSettings(window_seconds=0.5, budget_seconds=args.measure_seconds,
                                tolerance=args.search_tolerance),
        confirm_measure=MeasureSettings(window_seconds=1.0,
                                        budget_seconds=args.confirm_measure_seconds,
                                        tolerance=args.tolerance),
        confirm=args.confirm,
        confirm_repeats=args.confirm_repeats,
        prune=not args.no_prune,
    )
    display = RichDisplay()
    cache = out / "compile-cache"
    runner = ForkServerRunner(log=out / "forkserver.log", cache_dir=cache)
    writer = OutputWriter(settings)
    search = Search(settings, space, adapter, runner=runner, listener=display, on_change=writer,
                    confirm_runner=SubprocessRunner(cache_dir=cache))
    try:
        winner = search.run()
    except Interrupted as exc:
        display.console.print(f"[yellow]{exc}[/]: finished trials are saved in {out}/; run the "
                              "same command again to continue the study")
        return 128 + exc.signum
    finally:
        runner.close()
        writer.finish(search.study)
    if winner is None:
        return 1
    if winner.record.config is not None:
        from autotune.outputs.best import batch_change

        note = batch_change(winner.record.config, space.baseline.effective_batch)
        if note is not None:
            display.console.print(f"[bold yellow]note:[/] {note}")
    display.console.print(f"wrote {out}/best.yaml, {out}/trials.csv, {out}/throughput.png")
    return 0


def _lab(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autotune.adapter import load_adapter
    from autotune.contract.config import read_config
    from autotune.contract.fmt import human
    from autotune.contract.host import available_cpus
    from autotune.contract.request import MeasureSettings
    from autotune.contract.result import Fingerprint
    from autotune.lab import lab_rows, run_lab, save, summarize, to_markdown
    from autotune.study.runner import SubprocessRunner

    device = _resolve_device(args.device)
    adapter = load_adapter(args.adapter)
    tuned = read_config(args.config) if args.config else None
    out = args.out or Path("results") / f"{args.adapter.stem}-lab"
    _check_writable(out)
    rows = lab_rows(adapter, device=device, cpus=available_cpus(), tuned=tuned)
    console = Console()
    console.print(f"[bold]autotune lab[/] {args.adapter} on {device}: {len(rows)} rows x "
                  f"{args.repeats} repeats, each a fresh process")
    for row in rows:
        console.print(f"  {row.index}. {row.name}: {row.config.describe()}")
    if tuned is not None:
        from autotune.outputs.best import batch_change

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
    console.print(f"wrote {out}/lab.md and {out}/lab.json")
    return 0 if all(t["throughput"] for t in table) else 1


def _trial_timeout(given: float | None, budget: float | None) -> float:
    if given is not None:
        return given
    # max-autotune compiled GPT-2 small for 439 s on an H100 (torch 2.11) for no gain over
    # "default": one such trial must not silently take most of a short budget.
    return min(300.0, max(60.0, budget / 4)) if budget else 300.0


def _resolve_device(choice: str) -> str:
    import torch

    available = torch.cuda.is_available()
    if choice == "cuda" and not available:
        raise InputError("--device cuda: no CUDA device is visible to PyTorch; use --device cpu")
    if choice == "auto":
        return "cuda" if available else "cpu"
    return choice


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".autotune-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"--out {out}: cannot write there ({exc.strerror}); pick a folder you can write to"
        ) from None


def _show(args: argparse.Namespace) -> int:
    from autotune.outputs.show import show

    show(args.out, top=args.top)
    return 0


def _export(args: argparse.Namespace) -> int:
    from autotune.outputs.export import export_text

    sys.stdout.write(export_text(args.config, args.to, fmt=args.format))
    return 0


def _apply(args: argparse.Namespace) -> int:
    from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS
    from autotune.contract.config import read_config

    config = read_config(args.config)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError("autotune apply: give the command to run after --, e.g. "
                         "autotune apply best.yaml -- python train.py")
    env = dict(os.environ)
    for name in OTHER_ALLOC_ENVS:
        env.pop(name, None)
    env.pop(ALLOC_ENV, None)
    env.update(config.env)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        raise InputError(f"autotune apply: cannot run {cmd[0]!r} ({exc.strerror})") from None
    return 0  # not reached: exec replaced this process


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 1
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 1
