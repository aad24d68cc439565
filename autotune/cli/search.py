"""`autotune search`: run a study over the search space."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.cli.common import check_writable, positive, resolve_device, seed, trial_timeout
from autotune.contract.errors import InputError
from autotune.study.space.file import builtin_spaces

if TYPE_CHECKING:
    from autotune.adapter import Adapter
    from autotune.outputs.display import RichDisplay
    from autotune.study.confirmation.winner import Winner
    from autotune.study.execution.layout import Layout
    from autotune.study.search import Search
    from autotune.study.settings import SearchSettings
    from autotune.study.space.bound import SearchSpace

# With --timeout and no --trials, the budget decides (the search also ends once the sampler
# proposes nothing new).
UNBOUNDED_TRIALS = 1_000_000


def add_parser(sub: argparse._SubParsersAction) -> None:
    search = sub.add_parser("search", help="run a study over the search space")
    search.add_argument("--adapter", required=True, type=Path,
                        help="Python file defining one autotune.Adapter subclass")
    search.add_argument("--space", default=None,
                        help=f"search space: a built-in name ({', '.join(builtin_spaces())}) or "
                        "a .yaml path (default: 'default' on CUDA, 'cpu' on a CPU; 'full' adds "
                        "the max-autotune compile modes, for budgets of an hour or more)")
    search.add_argument("--trials", type=positive(int), default=None,
                        help="finished trials the study should hold (a resumed study counts its "
                        "earlier trials; default: as many as --timeout allows, or 20 without one)")
    search.add_argument("--timeout", type=positive(float), default=None,
                        help="seconds for this run: no trial starts after, and a running one is "
                        "cut at the deadline (default: none)")
    search.add_argument("--trial-timeout", type=positive(float), default=None,
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
                        "processes may share (default: OUT/study.db); postgresql://USER:PASSWORD"
                        "@HOST:PORT/DB for searches on several hosts sharing one study")
    search.add_argument("--heartbeat-interval", type=positive(int), default=10,
                        help="with a database server, each running trial records a heartbeat "
                        "this often, in seconds (default 10)")
    search.add_argument("--grace-period", type=positive(int), default=60,
                        help="with a database server, a running trial with no heartbeat for this "
                        "many seconds is failed by the other searches: its host died (default 60)")
    search.add_argument("--out", type=Path, default=None,
                        help="output folder (default: results/STUDY_NAME)")
    search.add_argument("--seed", type=seed, default=None, help="sampler seed (0 to 2**32 - 1)")
    search.add_argument("--measure-seconds", type=positive(float), default=5.0,
                        help="most seconds of timed windows per search trial after warm-up: "
                        "measuring stops earlier once the median is known to "
                        "--search-tolerance (3 windows are always timed; default 5)")
    search.add_argument("--search-tolerance", type=positive(float), default=0.05,
                        help="search trials stop timing once the median's 95%% confidence "
                        "interval is within +-this fraction (default 0.05: enough to rank and "
                        "prune; the confirmation pins the winner down to --tolerance)")
    search.add_argument("--confirm-measure-seconds", type=positive(float), default=20.0,
                        help="the same for each confirmation run (default 20)")
    search.add_argument("--confirm", type=int, default=3,
                        help="after the search, re-run this many top configs and the baseline in "
                        "fresh processes; the winner is picked on those runs (default 3; 0 skips)")
    search.add_argument("--confirm-repeats", type=positive(int), default=2,
                        help="fresh runs the winner needs before its lead is called clear; a "
                        "config clearly behind stops after one, an unclear one runs up to twice "
                        "this plus one (default 2)")
    search.add_argument("--tolerance", type=positive(float), default=0.02,
                        help="confirmation runs stop timing once the median's 95%% confidence "
                        "interval is within +-this fraction of it (default 0.02)")
    search.add_argument("--vary-global-batch", action="store_true",
                        help="let the search change the effective batch (batch_size x "
                        "grad_accum) too; by default every config keeps the adapter's "
                        "(global_batch_size, else batch_size), so training computes the same; "
                        "same as vary_global_batch = True in the adapter")
    search.add_argument("--nproc-per-node", type=positive(int), default=1,
                        help="run each trial as this many DDP ranks through torch.distributed."
                        "run, one GPU each (gloo ranks on a CPU), and search the DDP knobs too; "
                        "each rank gets its share of the CPUs (default 1: one process, no DDP)")
    search.add_argument("--gpus", default=None, metavar="all|0,1,...",
                        help="run one trial per GPU at once, each pinned to its GPU "
                        "(CUDA_VISIBLE_DEVICES) and to an equal share of the CPUs, which bounds "
                        "num_workers; the result holds for a job of that many ranks on this host "
                        "(default: one trial at a time with every CPU)")
    search.add_argument("--cpus-per-trial", type=positive(int), default=None,
                        help="pin each trial to this many CPUs instead of an equal share: what "
                        "each rank (or the one process) will have in production")
    search.add_argument("--no-prune", action="store_true",
                        help="measure every trial to the end, even one clearly slower than the "
                        "best so far")
    search.set_defaults(func=functools.partial(run, parser=search))


def run(args: argparse.Namespace, *, parser: argparse.ArgumentParser) -> int:
    """Check the flags, load the adapter and the space, search, say where the results are."""
    problem = flag_problem(args)
    if problem is not None:
        parser.error(problem)  # exits 1 with the usage line, before anything is loaded
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the display reports progress
    device = resolve_device(args.device)
    layout = _layout(args, device)
    adapter, space_path, space = _load(args, device, layout.cpus_per_trial)
    settings = _settings(args, device, layout, space_path)
    return _search(settings, layout, space, adapter)


def flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags alone (a value out of range, two that do not go together),
    in words; None when nothing is. Reads no file and starts nothing."""
    nproc = args.nproc_per_node
    if nproc > 1 and (args.gpus is not None or args.cpus_per_trial is not None):
        return (f"--nproc-per-node {nproc} with --gpus or --cpus-per-trial: a DDP trial takes "
                "its ranks' GPUs and splits the CPUs among them itself; concurrent DDP trials "
                "are not supported")
    if args.confirm < 0:
        return f"--confirm {args.confirm}: must be 0 (no confirmation) or more"
    for flag, value in (("--tolerance", args.tolerance),
                        ("--search-tolerance", args.search_tolerance)):
        if value >= 1:
            return f"{flag} {value}: must be a fraction below 1, e.g. 0.02"
    if args.grace_period <= args.heartbeat_interval:
        return (f"--grace-period {args.grace_period}: must be longer than "
                f"--heartbeat-interval {args.heartbeat_interval}, e.g. 6 times it")
    return None


def _layout(args: argparse.Namespace, device: str) -> Layout:
    """Where trials run: one at a time with each DDP rank's share of the CPUs, or the slots of
    --gpus and --cpus-per-trial."""
    from autotune.study.execution.layout import Layout, plan_layout

    if args.nproc_per_node > 1:
        return Layout.single(_cpus_per_rank(args.nproc_per_node, device))
    return plan_layout(args.gpus, args.cpus_per_trial, device=device)


def _load(args: argparse.Namespace, device: str, cpus: int
          ) -> tuple[type[Adapter], Path, SearchSpace]:
    """The adapter, and the space file (its path and the space it defines for this adapter)."""
    from autotune.adapter import load_adapter
    from autotune.study.space.file import find_space, load_space

    adapter = load_adapter(args.adapter)
    space_path = find_space(args.space or ("default" if device == "cuda" else "cpu"))
    space = load_space(space_path, adapter=adapter, device_type=device, cpus=cpus,
                       vary_global_batch=args.vary_global_batch, nproc=args.nproc_per_node)
    return adapter, space_path, space


def _settings(args: argparse.Namespace, device: str, layout: Layout, space_path: Path
              ) -> SearchSettings:
    """The search's settings from the flags (the output folder checked writable first)."""
    from autotune.study.settings import SearchSettings, confirm_measurement, search_measurement
    from autotune.study.store.storage import Heartbeat, default_storage_url

    study_name = args.study_name or args.adapter.stem
    out = args.out or Path("results") / study_name
    check_writable(out)
    return SearchSettings(
        adapter=args.adapter,
        space_source=str(space_path),
        device=device,
        out=out,
        storage=args.storage or default_storage_url(out),
        study_name=study_name,
        trials=args.trials or (20 if args.timeout is None else UNBOUNDED_TRIALS),
        timeout=args.timeout,
        trial_timeout=trial_timeout(args.trial_timeout, args.timeout),
        seed=args.seed,
        measure=search_measurement(budget_seconds=args.measure_seconds,
                                   tolerance=args.search_tolerance),
        confirm_measure=confirm_measurement(budget_seconds=args.confirm_measure_seconds,
                                            tolerance=args.tolerance),
        confirm=args.confirm,
        confirm_repeats=args.confirm_repeats,
        prune=not args.no_prune,
        cpus=layout.cpus_per_trial,
        nproc_per_node=args.nproc_per_node,
        layout=layout,
        heartbeat=Heartbeat(interval=args.heartbeat_interval, grace=args.grace_period),
    )


def _search(settings: SearchSettings, layout: Layout, space: SearchSpace,
            adapter: type[Adapter]) -> int:
    """Run the search with its runners (closed whatever happens) and its outputs written."""
    from autotune.outputs.display import RichDisplay
    from autotune.outputs.report import OutputWriter
    from autotune.study.execution.cache_repair import repair
    from autotune.study.execution.ddp_runner import DDPRunner
    from autotune.study.execution.forkserver import ForkServerRunner
    from autotune.study.execution.protocol import Runner
    from autotune.study.execution.slots import slot_runners
    from autotune.study.search import Interrupted, Search

    out, nproc = settings.out, settings.nproc_per_node
    display = RichDisplay()
    display.memory_formats = space.values("memory_format")  # a CNN's note, as soon as it shows
    cache = out / "compile-cache"
    repair(cache)  # a search killed outright may have left a build cut short
    runners: list[ForkServerRunner] | list[DDPRunner]
    confirm_runner: Runner
    if nproc > 1:  # fresh launchers for the search and the confirmation: the ranks are theirs
        ddp = DDPRunner(nproc_per_node=nproc, cache_dir=cache)
        runners, confirm_runner = [ddp], ddp
    else:  # one fork server per GPU slot (one without --gpus)
        runners, confirm_runner = slot_runners(layout, out=out, cache_dir=cache,
                                               ahead=settings.device == "cuda")
    writer = OutputWriter(settings)
    search = Search(settings, space, adapter, runners=runners, listener=display,
                    on_change=writer, confirm_runner=confirm_runner)
    stopped = None
    try:
        winner = search.run()
    except Interrupted as exc:
        stopped = str(exc)
        display.console.print(f"[yellow]{exc}[/]: finished trials are saved in {out}/; run the "
                              "same command again to continue the study")
        return 128 + exc.signum
    finally:
        for runner in {id(r): r for r in (*runners, confirm_runner)}.values():
            runner.close()
        writer.finish(search.study, stopped=stopped)
    return _report_end(search, winner, space, display)


def _report_end(search: Search, winner: Winner | None, space: SearchSpace,
                display: RichDisplay) -> int:
    """The run's last lines: the table when piped, who confirmed, the batch note, the files."""
    out = search.settings.out
    if display.plain:  # piped or logged: the run ends with the table `autotune show` prints
        from autotune.outputs.show import show

        show(out, console=display.console)
    if search.confirmed_by is not None:
        held = search.confirmed_by
        display.console.print(
            f"confirmation of the study's {held.done} finished trials: "
            f"{'done' if held.state == 'finished' else 'taken'} by another search "
            f"({held.describe()}), whose --out holds the confirmed best.yaml")
    if winner is None:
        return 1
    if winner.record.config is not None:
        from autotune.outputs.batch_note import batch_change
        from autotune.outputs.best import (conv_note, items_note, optimizer_note,
                                           params_not_measured, params_note)
        from autotune.outputs.report import declared_values
        from autotune.study.policy.batching import (loader_on_device, loader_sets_batch,
                                                    on_device_note, unbatched_note)
        from autotune.study.store.records import read_records

        recs = read_records(search.study)
        unbatched, device = loader_sets_batch(recs), loader_on_device(recs)
        for note in (batch_change(winner.record.config, space.baseline.effective_batch,
                                  winner.record.result.epoch_batches),
                     conv_note(winner.record.result, space.values("memory_format")),
                     optimizer_note(winner.record.result, space.values("optimizer_impl")),
                     items_note(search.adapter, recs, winner.record.result.unit),
                     None if unbatched is None else
                     unbatched_note(unbatched, winner.record.result.unit),
                     None if device is None else on_device_note(device, space.values("num_workers")),
                     None if display.plain else  # the table's lines said it (`show`)
                     params_note(params_not_measured(  # as best.yaml says it
                         declared_values(search.study, winner.record.config.params), recs))):
            if note is not None:
                display.console.print(f"[bold yellow]note:[/] {note}")
    display.console.print(f"wrote {out}/best.yaml, {out}/trials.csv, {out}/throughput.png")
    return 0


def _cpus_per_rank(nproc: int, device: str) -> int | None:
    """Each DDP rank's share of this process's CPUs (None: all, for one process); the ranks
    need a GPU each on CUDA."""
    if nproc == 1:
        return None
    from autotune.contract.host import available_cpus

    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        if nproc > gpus:
            raise InputError(f"--nproc-per-node {nproc}: only {gpus} GPU(s) are visible; one "
                             "rank per GPU")
    return max(1, available_cpus() // nproc)
