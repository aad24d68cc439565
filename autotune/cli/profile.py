"""`autotune profile`: where the time of one config's step goes, from `torch.profiler` run in a
fresh process with the config applied."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.cli.common import check_writable, positive, resolve_device
from autotune.contract.errors import InputError

if TYPE_CHECKING:
    from autotune.contract.profile import Breakdown, ProfileRequest
    from autotune.contract.result import Diagnosis

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    prof = sub.add_parser(
        "profile", help="profile one config's step: trace.json, breakdown.md, memory snapshot",
        description="Run the step with a config applied (best.yaml; PyTorch's defaults without "
        "--config) in a fresh process: time it as a trial does, then trace it with "
        "torch.profiler (wait, warm-up, active steps) with regions for data wait, "
        "host-to-device, forward, backward and optimizer. Writes trace.json (Perfetto / "
        "chrome://tracing), memory-snapshot.pickle on CUDA (pytorch.org/memory_viz), "
        "breakdown.md and breakdown.json (each region's share of the step, the slowest "
        "operators and kernels, GPU idle time, peak memory, the diagnosis's bound).",
    )
    prof.add_argument("--adapter", required=True, type=Path, help="the adapter file")
    which = prof.add_mutually_exclusive_group()
    which.add_argument("--config", type=Path, default=None,
                       help="best.yaml or a YAML of knobs (default: PyTorch's defaults)")
    which.add_argument("--compare", nargs=2, type=Path, metavar=("A.yaml", "B.yaml"),
                       help="profile two configs and put their breakdowns side by side")
    prof.add_argument("--out", type=Path, default=None,
                      help="folder for the files (default: results/ADAPTER-profile)")
    prof.add_argument("--tensorboard", action="store_true",
                      help="also write torch.profiler.tensorboard_trace_handler's output")
    prof.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    prof.add_argument("--steps", type=positive(int), default=5,
                      help="steps traced (the schedule's active steps; default 5)")
    prof.add_argument("--measure-seconds", type=positive(float), default=5.0,
                      help="seconds the step is timed without the profiler first (default 5)")
    prof.add_argument("--timeout", type=positive(float), default=600.0,
                      help="seconds the profile process may take, compile included "
                      "(default 600)")
    prof.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autotune.adapter import load_adapter
    from autotune.outputs.profile import to_markdown

    device = resolve_device(args.device)
    adapter = load_adapter(args.adapter)  # a broken adapter is named here, not in a child log
    out = args.out or Path("results") / f"{args.adapter.stem}-profile"
    check_writable(out)
    files = args.compare or [args.config]
    folders = ([out / "a", out / "b"] if args.compare else [out])
    requests = [_request(args, adapter, f, device) for f in files]  # every YAML read first
    columns = []
    for config_file, folder, request in zip(files, folders, requests):
        label = str(config_file) if config_file else "PyTorch defaults"
        print(f"autotune profile {args.adapter} on {device}: {label} "
              f"({request.trial.config.describe()}), log in {folder}/log.txt", flush=True)
        try:
            breakdown = _profile(request, folder, timeout=args.timeout)
        except KeyboardInterrupt:  # the profile process is gone (`_profile`)
            print("autotune profile: interrupted", file=sys.stderr)
            return 130
        (folder / "breakdown.md").write_text(to_markdown([(label, breakdown)]))
        columns.append((label, breakdown))
    if args.compare:
        (out / "breakdown.md").write_text(to_markdown(columns))
        (out / "breakdown.json").write_text(json.dumps(
            {label: b.to_dict() for label, b in columns}, indent=2) + "\n")
    print(_summary(columns))
    print(f"wrote {out}/breakdown.md" + (" (side by side; each profile in a/ and b/)"
                                         if args.compare else
                                         f", breakdown.json, {', '.join(columns[0][1].files)}"))
    return 0


def _request(args: argparse.Namespace, adapter: type, config_file: Path | None,
             device: str) -> ProfileRequest:
    from autotune.contract.config import read_config
    from autotune.contract.profile import ProfileRequest, ProfileSettings
    from autotune.contract.request import MeasureSettings, TrialRequest
    from autotune.study.policy.recipes import pytorch_defaults

    config = read_config(config_file) if config_file else pytorch_defaults(adapter)
    recorded = _recorded_diagnosis(config_file) if config_file else None
    trial = TrialRequest(adapter=str(args.adapter), config=config, device=device,
                         measure=MeasureSettings(budget_seconds=args.measure_seconds))
    return ProfileRequest(trial=trial, diagnosis=recorded,
                          settings=ProfileSettings(active=args.steps,
                                                   tensorboard=args.tensorboard))


def _recorded_diagnosis(path: Path) -> Diagnosis | None:
    """The `diagnosis:` block of a best.yaml, None when it has none (a YAML of knobs)."""
    import yaml

    from autotune.contract.profile import read_diagnosis

    doc = yaml.safe_load(path.read_text())  # read_config has parsed and checked it
    return read_diagnosis(doc.get("diagnosis") if isinstance(doc, dict) else None)


def _profile(request: ProfileRequest, folder: Path, *, timeout: float) -> Breakdown:
    """Run the profile process (a process group of its own, with the config's allocator
    environment, as a trial) and read its breakdown."""
    from autotune.contract.profile import Breakdown
    from autotune.study.execution.processes import kill_group
    from autotune.study.execution.runner import child_env

    folder.mkdir(parents=True, exist_ok=True)
    for stale in ("breakdown.json", "trace.json", "memory-snapshot.pickle"):
        (folder / stale).unlink(missing_ok=True)
    shutil.rmtree(folder / "tensorboard", ignore_errors=True)  # one run per folder
    (folder / "request.json").write_text(json.dumps(request.to_dict(), indent=2))
    log = folder / "log.txt"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autotune.trial.profile", str(folder)],
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            env=child_env(request.trial.config.env, cache_dir=None), start_new_session=True)
        killed = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
        finally:  # a timeout, Ctrl-C or an error here: leave none of its processes behind
            kill_group(proc, 3.0 if killed else 0.0)
    result = folder / "breakdown.json"
    if killed or proc.returncode != 0 or not result.is_file():
        why = (f"killed at the {timeout:.0f} s limit (--timeout)" if killed
               else f"exit {proc.returncode}")
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise InputError(f"the profile process failed ({why}); the end of {log}:\n{tail}")
    return Breakdown.load(result)


def _summary(columns: list[tuple[str, Breakdown]]) -> str:
    """A few lines for the terminal: each config's regions and bound."""
    lines = []
    for label, b in columns:
        parts = ", ".join(f"{r.name} {r.host_share:.0%}" for r in b.regions)
        bound = f"; {b.diagnosis.verdict.value}" if b.diagnosis else ""
        lines.append(f"{label}: step {b.step_seconds * 1e3:.3g} ms profiled: {parts}{bound}")
    return "\n".join(lines)
