"""Each value of the kernel knobs side by side: alternating fresh runs over one base config.

    python benchmarks/measurement/knobs.py --adapter adapters/resnet.py --config base.yaml \
        [--knob memory_format] [--knob optimizer_impl=default,fused | --knob none] [--runs 3] \
        [--measure-seconds 20] [--device cuda] [--json OUT.json]

The base config is a YAML of knobs (or a best.yaml). Each knob named (by default the four the
tool owns for the step's kernels: optimizer_impl, memory_format, sdpa_backend, cudnn_benchmark)
is set to each of its values (or those listed after `=`) with the rest of the base kept; values
that only mean something on CUDA are left out on a CPU. Every config then runs once per round,
in a fresh process exactly as a confirmation run measures (as `search/versus.py`), the rounds
repeated `--runs` times, so that drift of the machine falls on every config alike. A value
that cannot run (an attention kernel PyTorch refuses) is recorded with its status and reason.
Prints each config's median and its ratio to the base; `--json` writes device, torch, date,
commit, the configs and every run, and after each run what ran so far (`"partial": true`), so a
call cut short keeps its runs. On a CPU in seconds:

    python benchmarks/measurement/knobs.py --adapter adapters/mlp.py --config base.yaml \
        --device cpu --runs 1 --measure-seconds 1
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import autotune  # noqa: E402
from autotune.contract.config import KNOB, TrainConfig, read_config  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status, TrialResult  # noqa: E402
from autotune.study.execution.forkserver import ForkServerRunner  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402

FORKED = " (forked)"
"""The suffix of a config's name run as a search trial is: forked from a warm server."""
KERNEL_KNOBS = ("optimizer_impl", "memory_format", "sdpa_backend", "cudnn_benchmark")
REPO = Path(__file__).resolve().parents[2]


def _value(text: str, name: str) -> Any:
    """A value of knob `name` from the command line ("true", "fused", "64", "null")."""
    import yaml

    value = yaml.safe_load(text)
    problem = KNOB[name].problem(value)
    if problem is not None:
        raise SystemExit(f"--knob {name}: {problem}")
    return value


def configs_to_compare(base: TrainConfig, knobs: list[str], device: str
                       ) -> list[tuple[str, TrainConfig]]:
    """("base", base), then (f"{knob}={value}", base with it) for each value that differs;
    `knobs` ["none"]: the base alone (whole configs beside it come from --extra)."""
    if "none" in knobs and knobs != ["none"]:
        raise SystemExit("--knob none: no knob is varied, so name no other --knob beside it")
    out: list[tuple[str, TrainConfig]] = [("base", base)]
    for item in ([] if knobs == ["none"] else knobs):
        name, _, listed = item.partition("=")
        if name not in KNOB:
            raise SystemExit(f"--knob {name}: unknown knob; known: {', '.join(KNOB)}")
        spec = KNOB[name]
        values = ([_value(v, name) for v in listed.split(",")] if listed else
                  list(spec.allowed or ((False, True) if spec.kind is bool else ())))
        if not values:
            raise SystemExit(f"--knob {name}: list its values, e.g. --knob {name}=1,2")
        for value in values:
            if device != "cuda" and spec.cuda_only(value):
                print(f"skipped {name}={value}: only means something on CUDA")
                continue
            config = base.replace(**{name: value})
            if all(config != c for _, c in out):
                out.append((f"{name}={value}", config))
    return out


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def variants_of(texts: list[str]) -> dict[str, dict[str, str]]:
    """--variant NAME:VAR=VALUE[,VAR=VALUE]: the base config run with those environment
    variables set (e.g. an inductor setting read from the environment), by NAME."""
    out: dict[str, dict[str, str]] = {}
    for text in texts:
        name, _, assignments = text.partition(":")
        pairs = [a.partition("=") for a in assignments.split(",") if a]
        if not name or not pairs or any(not var or not eq for var, eq, _ in pairs):
            raise SystemExit(f"--variant {text}: write NAME:VAR=VALUE[,VAR=VALUE], e.g. "
                             "cd:TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1")
        out[name] = {var: value for var, _, value in pairs}
    return out


def run_rounds(args: argparse.Namespace, configs: list[tuple[str, TrainConfig]], unit: str,
               envs: dict[str, dict[str, str]] | None = None) -> dict[str, list[TrialResult]]:
    """Every config once a round, `args.runs` rounds; a config named in `envs` runs with those
    environment variables added; one named FORKED's run is forked from a warm server, as a
    search trial is (`ForkServerRunner`), the others are fresh processes, as confirmation runs."""
    runs: dict[str, list[TrialResult]] = {name: [] for name, _ in configs}
    measure = MeasureSettings(budget_seconds=args.measure_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "compile-cache"
        forked = ForkServerRunner(log=Path(tmp) / "forkserver.log", cache_dir=cache)
        runners = {name: forked if name.endswith(FORKED)
                   else SubprocessRunner(cache_dir=cache, env=(envs or {}).get(name))
                   for name, _ in configs}
        try:
            _rounds(args, configs, unit, runners, runs, measure, Path(tmp))
        finally:
            forked.close()
    return runs


def _rounds(args: argparse.Namespace, configs: list[tuple[str, TrainConfig]], unit: str,
            runners: dict[str, SubprocessRunner], runs: dict[str, list[TrialResult]],
            measure: MeasureSettings, tmp: Path) -> None:
    for i in range(args.runs):
        for name, config in configs:
            request = TrialRequest(adapter=args.adapter, config=config, device=args.device,
                                   measure=measure, number=i, diagnose=False)
            result = runners[name].run(request, tmp / f"{len(runs[name])}-{name}",
                                       timeout=args.timeout)
            runs[name].append(result)
            ok = result.status is Status.OK and result.throughput
            said = (f"{result.throughput:,.0f} {unit}/s" if ok
                    else f"{result.status.value} {result.reason}")
            print(f"round {i + 1}/{args.runs} {name}: {said}", flush=True)
            if args.json is not None:  # what ran so far, should the call's time run out
                write_json(args.json, {**summary_of(args, configs, runs, unit), "partial": True})


def write_json(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1) + "\n")


def summary_of(args: argparse.Namespace, configs: list[tuple[str, TrainConfig]],
               runs: dict[str, list[TrialResult]], unit: str) -> dict[str, Any]:
    rates = {name: [r.throughput for r in rs if r.status is Status.OK and r.throughput]
             for name, rs in runs.items()}
    medians = {name: statistics.median(v) for name, v in rates.items() if v}
    base = medians.get("base")
    fingerprint = next((r.fingerprint for rs in runs.values() for r in rs if r.fingerprint),
                       None)
    return {
        "device": None if fingerprint is None else fingerprint.device,
        "torch": None if fingerprint is None else fingerprint.torch,
        "date": None if fingerprint is None else fingerprint.date,
        "commit": commit(), "adapter": args.adapter, "unit": unit,
        "base_config": str(args.config), "measure_seconds": args.measure_seconds,
        "configs": [{"name": name, "config": config.to_dict(), "describe": config.describe(),
                     "median": medians.get(name),
                     "ratio_to_base": (medians[name] / base if base and name in medians
                                       else None)}
                    for name, config in configs],
        "runs": {name: [{"status": r.status.value, "throughput": r.throughput,
                         "reason": r.reason, "spread": r.spread,
                         "compile_seconds": r.compile_seconds, "recompiles": r.recompiles,
                         "recompile_reason": r.recompile_reason} for r in rs]
                 for name, rs in runs.items()},
    }


def add_mfu(summary: dict[str, Any], flops_per_item: float | None) -> None:
    """Each config's model FLOPs utilization against the bf16 matmul rate measured here, after
    the runs (so the ceiling's CUDA context never overlaps them)."""
    from autotune.trial.ceiling import bf16_matmul_flops

    ceiling = bf16_matmul_flops()
    summary["bf16_matmul_tflops"] = ceiling / 1e12
    summary["flops_per_item"] = flops_per_item
    for c in summary["configs"]:
        c["mfu"] = (c["median"] * flops_per_item / ceiling
                    if c["median"] and flops_per_item else None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--config", type=Path, required=True,
                   help="the base config: a YAML of knobs or a best.yaml")
    p.add_argument("--knob", action="append", default=None,
                   help="a knob to vary, optionally with its values (sdpa_backend=flash,math); "
                        "repeatable; default: " + ", ".join(KERNEL_KNOBS) + "; 'none': no "
                        "knob varied, only the base beside --extra/--variant configs (the "
                        "default runs every kernel knob's values before them)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--runs", type=int, default=3, help="rounds of fresh runs of every config")
    p.add_argument("--measure-seconds", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--extra", type=Path, action="append", default=[],
                   help="a whole config (YAML of knobs or best.yaml) to run beside the others, "
                        "named by its file's stem; repeatable")
    p.add_argument("--forked", action="store_true",
                   help="run every config a second time each round, forked from a warm server "
                        "as a search trial is (named 'NAME (forked)'), beside its fresh process")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:VAR=VALUE[,VAR=VALUE]: the base config again, run with these "
                        "environment variables (e.g. an inductor setting); repeatable")
    p.add_argument("--mfu", action="store_true",
                   help="CUDA: after the rounds, measure the bf16 matmul ceiling in this process "
                        "and give each config's MFU (the adapter's flops_per_item)")
    args = p.parse_args(argv)

    base = read_config(args.config)
    configs = configs_to_compare(base, args.knob or list(KERNEL_KNOBS), args.device)
    configs += [(path.stem, read_config(path)) for path in args.extra]
    envs = variants_of(args.variant)
    taken = [name for name in envs if any(name == n for n, _ in configs)]
    if taken:
        raise SystemExit(f"--variant {taken[0]}: a config of that name runs already; name the "
                         "variant otherwise")
    configs += [(name, base) for name in envs]
    if args.forked:
        configs += [(name + FORKED, config) for name, config in configs if name not in envs]
    adapter_cls = autotune.load_adapter(args.adapter)
    unit = adapter_cls.unit
    runs = run_rounds(args, configs, unit, envs)
    summary = summary_of(args, configs, runs, unit)
    summary["variants"] = envs
    if args.mfu:
        add_mfu(summary, adapter_cls().flops_per_item())
    print(f"KNOBS {Path(args.adapter).stem} on {summary['device']} (torch {summary['torch']}), "
          f"base {base.describe()}:")
    for c in summary["configs"]:
        median = "no ok run" if c["median"] is None else f"{c['median']:,.0f} {unit}/s"
        ratio = "" if c["ratio_to_base"] is None else f"  x{c['ratio_to_base']:.3f}"
        mfu = f"  MFU {c['mfu']:.1%}" if c.get("mfu") else ""
        print(f"  {c['name']:<28} {median}{ratio}{mfu}")
    if args.mfu:
        print(f"  ceiling: bf16 matmul {summary['bf16_matmul_tflops']:.0f} TFLOP/s (measured here)")
    if args.json is not None:
        write_json(args.json, summary)
    return 0 if summary["configs"][0]["median"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
