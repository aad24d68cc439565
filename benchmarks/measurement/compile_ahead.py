"""Does compiling ahead pay? A trial measured while a spare process compiles the next config.

    python benchmarks/measurement/compile_ahead.py --adapter adapters/gpt.py \
        --measured eager.yaml --ahead compiled.yaml [--runs 2] [--measure-seconds 10] \
        [--device cuda] [--json OUT.json]

Issue 24 asks to try it: while one trial measures, a spare process on the free cores compiles
the next compiled config's graph into the shared inductor cache, so that config's trial is a
cache hit; kept only if the H100 shows it pays. Each round, in fresh processes (as confirmation
runs) and each way with its own empty compile cache:
- in turn: the measured config (A), then the compiled one (B), its compile cold;
- ahead: A beside a spare run of B (its steps compile B's graphs; it measures a window and
  ends), then B again, its compile from the cache the spare filled.
The two ways alternate which goes first from round to round. Printed per round: A's rate each
way (what the spare's compile took from the trial being measured, which a search ranks by), B's
compile seconds cold and after the spare, and the seconds each way took end to end. It pays
only if A's rate beside the spare stays within the measurement's tolerance and the seconds
saved are worth having. On a CPU in a minute (MLP_* sizes as the tests use):

    python benchmarks/measurement/compile_ahead.py --adapter adapters/mlp.py --device cpu \
        --measured m.yaml --ahead c.yaml --runs 1 --measure-seconds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.contract.config import TrainConfig, read_config  # noqa: E402
from autotune.contract.request import MeasureSettings, TrialRequest  # noqa: E402
from autotune.contract.result import Status, TrialResult  # noqa: E402
from autotune.study.execution.runner import SubprocessRunner  # noqa: E402

SPARE_MEASURE_SECONDS = 0.5
"""The spare run's timed windows: it is there to compile; a window or three and it ends."""


def _rate(result: TrialResult) -> float | None:
    return result.throughput if result.status is Status.OK else None


def _say(result: TrialResult) -> str:
    if result.status is not Status.OK:
        return f"{result.status.value}: {result.reason}"
    return (f"{result.throughput:,.0f}/s in {result.duration_seconds:.1f} s, compile "
            f"{result.compile_seconds or 0.0:.1f} s")


class Pair:
    """One round's two configs, run in fresh processes under `root`."""

    def __init__(self, args: argparse.Namespace, measured: TrainConfig, ahead: TrainConfig,
                 root: Path) -> None:
        self.args, self.measured, self.ahead, self.root = args, measured, ahead, root

    def _run(self, config: TrainConfig, cache: Path, name: str, seconds: float) -> TrialResult:
        request = TrialRequest(adapter=self.args.adapter, config=config, device=self.args.device,
                               measure=MeasureSettings(budget_seconds=seconds), diagnose=False)
        return SubprocessRunner(cache_dir=cache).run(request, self.root / name,
                                                     timeout=self.args.timeout)

    def in_turn(self, tag: str) -> dict[str, Any]:
        cache = self.root / f"{tag}-cache"
        start = time.perf_counter()
        a = self._run(self.measured, cache, f"{tag}-A", self.args.measure_seconds)
        b = self._run(self.ahead, cache, f"{tag}-B", self.args.measure_seconds)
        return {"A": a, "B": b, "seconds": time.perf_counter() - start}

    def ahead_of_time(self, tag: str) -> dict[str, Any]:
        cache = self.root / f"{tag}-cache"
        spare: dict[str, TrialResult] = {}

        def compile_b() -> None:
            spare["run"] = self._run(self.ahead, cache, f"{tag}-spare", SPARE_MEASURE_SECONDS)

        start = time.perf_counter()
        thread = threading.Thread(target=compile_b, name="spare-compile")
        thread.start()
        a = self._run(self.measured, cache, f"{tag}-A", self.args.measure_seconds)
        thread.join()
        b = self._run(self.ahead, cache, f"{tag}-B", self.args.measure_seconds)
        return {"A": a, "spare": spare["run"], "B": b, "seconds": time.perf_counter() - start}


def one_round(pair: Pair, i: int) -> dict[str, Any]:
    ways = [("in_turn", pair.in_turn), ("ahead", pair.ahead_of_time)]
    if i % 2:
        ways.reverse()  # drift of the machine falls on both ways alike
    out: dict[str, Any] = {name: way(f"r{i}-{name}") for name, way in ways}
    seq, ahead = out["in_turn"], out["ahead"]
    print(f"round {i + 1} ({ways[0][0]} first): in turn {seq['seconds']:.1f} s (A {_say(seq['A'])}; B {_say(seq['B'])})",
          flush=True)
    print(f"         ahead   {ahead['seconds']:.1f} s (A {_say(ahead['A'])}; spare "
          f"{_say(ahead['spare'])}; B {_say(ahead['B'])})", flush=True)
    out["round"], out["first"] = i + 1, ways[0][0]
    return out


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per round the figures that decide it, and their medians over the rounds."""
    rows = []
    for r in rounds:
        seq, ahead = r["in_turn"], r["ahead"]
        a_seq, a_ahead = _rate(seq["A"]), _rate(ahead["A"])
        rows.append({
            "round": r["round"], "first": r["first"],
            "a_rate_in_turn": a_seq, "a_rate_beside_spare": a_ahead,
            "a_ratio": a_ahead / a_seq if a_seq and a_ahead else None,
            "b_compile_cold": seq["B"].compile_seconds,
            "b_compile_after_spare": ahead["B"].compile_seconds,
            "b_rate_in_turn": _rate(seq["B"]), "b_rate_after_spare": _rate(ahead["B"]),
            "seconds_in_turn": seq["seconds"], "seconds_ahead": ahead["seconds"],
            "spare": {"status": ahead["spare"].status.value,
                      "seconds": ahead["spare"].duration_seconds,
                      "compile_seconds": ahead["spare"].compile_seconds},
        })

    def median(key: str) -> float | None:
        values = [row[key] for row in rows if row[key] is not None]
        return statistics.median(values) if values else None

    return {"rounds": rows, "a_ratio": median("a_ratio"),
            "seconds_saved": (median("seconds_in_turn") or 0.0) - (median("seconds_ahead") or 0.0),
            "b_compile_cold": median("b_compile_cold"),
            "b_compile_after_spare": median("b_compile_after_spare")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--measured", type=Path, required=True,
                   help="the config a trial measures (YAML of knobs or a best.yaml)")
    p.add_argument("--ahead", type=Path, required=True,
                   help="the compiled config to compile ahead, beside it")
    p.add_argument("--device", default="cuda")
    p.add_argument("--runs", type=int, default=2, help="rounds, each way once a round")
    p.add_argument("--first-round", type=int, default=1,
                   help="number the rounds from here (an even one runs the spare's way first): "
                        "a call continuing an earlier one's rounds")
    p.add_argument("--measure-seconds", type=float, default=10.0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    measured, ahead = read_config(args.measured), read_config(args.ahead)
    if ahead.compile == "none":
        raise SystemExit(f"--ahead {args.ahead}: its config does not compile (compile: none); "
                         "name a config with compile: default, reduce-overhead or max-autotune")
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        pair = Pair(args, measured, ahead, Path(tmp))
        for i in range(args.first_round - 1, args.first_round - 1 + args.runs):
            rounds.append(one_round(pair, i))
            if args.json is not None:  # what ran so far, should the call's time run out
                write(args, rounds, measured, ahead, partial=True)
    write(args, rounds, measured, ahead, partial=False)
    return 0 if summarize(rounds)["a_ratio"] is not None else 1


def write(args: argparse.Namespace, rounds: list[dict[str, Any]], measured: TrainConfig,
          ahead: TrainConfig, *, partial: bool) -> None:
    summary = summarize(rounds)
    fingerprint = next((r[w]["A"].fingerprint for r in rounds for w in ("in_turn", "ahead")
                        if r[w]["A"].fingerprint), None)
    summary |= {"adapter": args.adapter, "measured": measured.describe(),
                "ahead": ahead.describe(), "measure_seconds": args.measure_seconds,
                "device": None if fingerprint is None else fingerprint.device,
                "torch": None if fingerprint is None else fingerprint.torch,
                "date": None if fingerprint is None else fingerprint.date, "partial": partial}
    ratio = summary["a_ratio"]
    if not partial:
        print(f"COMPILE AHEAD {Path(args.adapter).stem}: A beside the spare "
              f"{'n/a' if ratio is None else f'{ratio:.3f}x'} its rate in turn; B's compile "
              f"{summary['b_compile_cold'] or 0:.1f} s cold, "
              f"{summary['b_compile_after_spare'] or 0:.1f} s after the spare; "
              f"{summary['seconds_saved']:.1f} s saved a round (median)")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
