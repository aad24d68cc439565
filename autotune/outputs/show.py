"""`autotune show DIR`: the top trials of a study as a table, read from its storage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import optuna
import rich.box
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autotune.contract.config import KNOBS, TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.fmt import human
from autotune.contract.recompiles import divisor, recompile_note
from autotune.contract.result import NOT_RUN
from autotune.contract.shapes import padding_note
from autotune.outputs.decision import decision_note, spread_warnings, winner_phrases
from autotune.outputs.table import trial_rows
from autotune.study.confirmation.winner import Winner, best_and_baseline, pick_winner
from autotune.study.store import records, study_attrs
from autotune.study.store.storage import open_storage
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["load_study", "next_steps", "show", "winner_line"]


def load_study(out: Path) -> optuna.Study:
    """The study a search wrote into `out` (its study.yaml says where the storage is)."""
    pointer = out / "study.yaml"
    try:
        info = yaml.safe_load(pointer.read_text())
    except OSError:
        raise InputError(f"{pointer}: not found; pass the --out folder of an autotune search") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{pointer}: not valid YAML ({exc}); the search rewrites it on its next "
                         "run") from None
    if not isinstance(info, dict) or not {"study_name", "storage"} <= set(info):
        raise InputError(f"{pointer}: expected keys study_name and storage")
    try:
        return optuna.load_study(study_name=info["study_name"], storage=open_storage(info["storage"]))
    except KeyError:
        raise InputError(
            f"{pointer}: study {info['study_name']!r} is not in {info['storage']}"
        ) from None


def show(out: Path, *, top: int = 10, console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:
            console.width = 160  # piped or logged: don't squeeze the table into 80 columns
    study = load_study(out)
    recs = records.read_records(study)
    _, baseline = best_and_baseline(recs)
    confirmation = study_attrs.read_confirmation(study)
    winner = pick_winner(recs, confirmation)
    info = study_attrs.read_info(study)
    all_rows = trial_rows(recs, baseline, winner, info.unit if info else None)
    # The search's trials; confirmation runs and the winner's record are told below.
    rows = [r for r in all_rows if r["role"] not in (records.CONFIRM, records.WINNER)]
    unit = info.unit if info else "items"
    # A copy (the sampler proposed a config measured before) repeats its original's row.
    ok = sorted((r for r in rows if r["status"] == "ok" and r["copy_of"] is None),
                key=lambda r: -r["throughput"])
    copies = sum(r["copy_of"] is not None for r in rows)
    # Piped or logged: ASCII lines, not box-drawing characters a log or a grep may mangle.
    box = rich.box.HEAVY_HEAD if console.is_terminal else rich.box.ASCII
    justify: Literal["center", "left"] = "center" if console.is_terminal else "left"
    copied = f", {copies} {'copy' if copies == 1 else 'copies'} not shown" if copies else ""
    table = Table(title=f"{study.study_name}: top {min(top, len(ok))} of {len(rows)} trials "
                  f"({unit}/s{copied})", box=box, title_justify=justify)
    for name in ("#", f"{unit}/s", "x base", "spread", "step ms", "compile s", "recompiles",
                 "data wait", "peak GB", "bound", "config"):
        table.add_column(name, justify="left" if name == "config" else "right",
                         no_wrap=name != "config")
    for r in ok[:top]:
        config = TrainConfig(**{spec.name: r[spec.name] for spec in KNOBS},
                             params=r.get("params", {}))
        peak = r["peak_reserved_mb"] or r["peak_rss_mb"]  # device memory, else host RSS
        table.add_row(
            f"{r['number']}" + (" (base)" if r["baseline"] else ""),
            human(r["throughput"]),
            f"{r['speedup']:.2f}" if r["speedup"] else "-",
            f"{r['spread']:.1%}" + ("" if r["converged"] else "*") if r["spread"] is not None else "-",
            f"{r['step_seconds'] * 1e3:.1f}" if r["step_seconds"] else "-",
            f"{r['compile_seconds']:.1f}" if r["compile_seconds"] is not None else "-",
            "-" if r["recompiles"] is None else str(r["recompiles"]),
            f"{r['data_wait_fraction']:.0%}" if r["data_wait_fraction"] is not None else "-",
            f"{peak / 1024:.1f}" if peak else "-",
            (r["verdict"] or "-").replace("-bound", ""),
            config.describe(),
        )
    if not ok:  # an empty table said nothing of why (a held-out user's failed baseline)
        for r in [r for r in rows if r["status"] not in ("ok", "running", "")][:5]:
            console.print(f"#{r['number']} {r['status']}: {r['reason'] or '(no reason)'}"
                          + (f"\n  log: {r['log']}" if r["log"] else ""))
    else:
        console.print(table)
    if any(r["status"] == "ok" and not r["converged"] for r in rows):
        console.print("* not converged: the windows' median was not known to the tolerance when "
                      "the time ran out (windows that disagree, or too few of them to tell)")
    _print_shape_notes(console, ok, rows, cuda=info is None or info.device != "cpu")
    if note := _base_note(confirmation or ()):
        console.print(note)
    if confirmation and winner is not None:
        console.print(_fresh_table(confirmation, winner, box=box, justify=justify))
    if winner is not None:
        _print_winner(console, winner, unit, None if info is None else info.adapter, out)
    # A config refused unrun is told to the study as a timeout (its reason "not run: ..."):
    # counted with the timeouts it read as one that had run and been cut.
    failed = Counter(NOT_RUN if str(r["reason"] or "").startswith(NOT_RUN) else r["status"]
                     for r in rows if r["status"] not in ("ok", "running", ""))
    if failed:
        console.print("other trials: " + ", ".join(f"{n} {s}" for s, n in sorted(failed.items())))


def _fresh_table(confirmation: Sequence[ConfirmationEntry], winner: Winner, *, box: rich.box.Box,
                 justify: Literal["center", "left"]) -> Table:
    """The confirmation's fresh re-runs, one row a config."""
    base = winner.baseline if winner.confirmation else None
    # Short enough not to wrap over a narrow table (it broke mid-sentence, padded).
    conf = Table(title="fresh re-runs: the winner is picked here", box=box, title_justify=justify)
    for name in ("#", "runs", "median", "spread", "x base", "search said"):
        conf.add_column(name, justify="right")
    for c in confirmation:
        conf.add_row(
            f"{c.trial}" + (" (base)" if c.baseline else "")
            + (" (winner)" if c.trial == winner.record.number else ""),
            ", ".join(human(v) for v in c.throughputs) or ", ".join(c.statuses)
            or "none: judged by its search rate",  # no time left, or clearly behind
            human(c.median),
            f"{c.spread:.1%}" if c.spread is not None else "-",
            f"{c.median / base:.2f}" if c.median and base else "-",
            human(c.search_throughput),
        )
    return conf


def _base_note(confirmation: Sequence[ConfirmationEntry]) -> str | None:
    """Said when the search's "x base" divides by a baseline reading its fresh runs disagree
    with by more than a tenth: a held-out user's baseline read 30.3k in the search and 44.1k
    fresh, and a trial shown at 1.38x ran 0.90x it fresh (2-CPU VM, 2026-11-28)."""
    base = next((c for c in confirmation if c.baseline and c.median), None)
    if base is None or not base.median or base.search_throughput <= 0:
        return None
    off = base.search_throughput / base.median
    if 1 / 1.1 <= off <= 1.1:
        return None
    return (f"x base divides by the baseline's search reading, {human(base.search_throughput)}; "
            f"its fresh runs read {human(base.median)}, so the search's ratios read {1 / off:.2f}x "
            f"what they would against that (the fresh re-runs' x base uses it)")


def winner_line(winner: Winner, unit: str) -> str:
    """The winner as best.yaml states it: the same trial, rate, ratio and confidence."""
    d = winner.decision
    # The search trial first, as the run's lines named it ("best: trial #2"); the study's
    # record of the confirmed winner (its best_trial) second.
    kept = "confirmed" if d is not None and d.runs else "kept"  # baseline kept: no fresh run
    where = (f"trial {winner.record.number} ({kept}, recorded in the study as trial "
             f"{winner.study_trial})" if winner.confirmation and winner.study_trial is not None
             else f"trial {winner.record.number}")
    how = (f"median of {d.runs} fresh run(s)" if d is not None and d.runs
           else "one search measurement, not confirmed")
    speed, verdict = winner_phrases(winner)
    sure = f", {decision_note(winner)}" if d is not None else ""
    return (f"winner: {where}, {human(winner.throughput)} {unit}/s ({how}){speed}"
            f"{verdict.replace(' (', '; ', 1).rstrip(')')}{sure}")


def _print_winner(console: Console, winner: Winner, unit: str, adapter: str | None,
                  out: Path) -> None:
    """The winner as best.yaml states it, its warnings and notes, and where to go next."""
    stopped = _best_note(out / "best.yaml", "stopped")
    if stopped:  # a search stopped early: what follows is not its answer yet
        console.print(f"stopped: {stopped}", markup=False, highlight=False)
    console.print(winner_line(winner, unit))
    for warning in spread_warnings(winner, unit):  # best.yaml's decision.warnings
        console.print(f"warning: {warning}")
    if adapter is not None and (out / "best.yaml").is_file():
        unmeasured = _best_note(out / "best.yaml", "params_not_measured")
        if unmeasured:  # params: holds the best of what ran, not of what was declared
            console.print(f"note: {unmeasured}", markup=False, highlight=False)
        for line in next_steps(winner, adapter, out / "best.yaml"):
            console.print(line, markup=False, highlight=False)


def _best_note(best: Path, key: str) -> str | None:
    """best.yaml's `key`: a sentence (`stopped`), or a block's `note` (`params_not_measured`,
    the adapter's knob values the search never measured); None where it has none."""
    try:
        doc = yaml.safe_load(best.read_text())
    except (OSError, yaml.YAMLError):
        return None
    block = doc.get(key) if isinstance(doc, dict) else None
    if isinstance(block, dict):
        return block.get("note")
    return block if isinstance(block, str) else None


def next_steps(winner: Winner, adapter: str, best: Path) -> list[str]:
    """Where to go from the winner: its profile, under the diagnosis's bound; the performance
    gate, once the config is applied."""
    result = winner.record.result
    d = result.diagnosis if result is not None else None
    bound = f" ({d.verdict.value} by the diagnosis)" if d is not None else ""
    return [f"where the winner's step goes{bound}: autotune profile --adapter {adapter} "
            f"--config {best}",
            f"after autotune apply, keep its speed (e.g. in CI): autotune check --adapter "
            f"{adapter} --against {best}"]


def _print_shape_notes(console: Console, ok: list[dict[str, Any]],
                       rows: list[dict[str, Any]], *, cuda: bool) -> None:
    """What varying shapes cost: over what they varied (the fastest trial of `ok` that saw
    them vary) and what padding would leave; then a line for each of the fastest three trials
    whose compile kept going, on which guard, and what padding stops it."""
    varied = next((r for r in ok if r["shapes_vary"]), None)
    if varied is not None:
        console.print(padding_note(varied["shape_range"] or "", varied["shape_count"],
                      batch_size=varied["batch_size"], padded=varied["shape_count_padded"],
                      cuda=cuda, compiled=varied["compile"] != "none"))
    for r in _kept_compiling(rows)[:3]:
        console.print(escape(f"trial {r['number']}: " + recompile_note(
            r["recompiles"], r["recompile_seconds"], r["recompile_reason"])))


def _kept_compiling(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trials whose compile kept going after the first step, fastest first: two recompiles or
    more, a guard on the sizes' divisibility, or a trial that did not end ok. One recompile is
    Dynamo's default (static shapes first, dynamic at the first new size), not news."""
    def kept(r: dict[str, Any]) -> bool:
        reasons = r.get("recompile_reason") or ""
        return bool(reasons) and (
            (r["recompiles"] or 0) >= 2 or divisor(reasons) is not None or r["status"] != "ok")
    return sorted(filter(kept, rows), key=lambda r: -(r["throughput"] or 0.0))
