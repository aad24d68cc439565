"""How sure a search is of its winner, in words: best.yaml's `confidence` and `decision` block,
the warnings on runs that disagree, and the phrases the display and `autotune show` end with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autotune.contract.fmt import human, rounded
from autotune.contract.noise import SPREAD_WARNING, likely_cause, spread_warning
from autotune.study.confirmation.lead import DISAGREE, disagreement, evidence, standing
from autotune.study.confirmation.winner import BASELINE_KEPT, Winner
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["decision_block", "decision_note", "speedup_note", "spread_warnings", "winner_phrases"]


def decision_block(winner: Winner, unit: str) -> dict[str, Any]:
    """`confidence` (high or low) and the numbers behind it: how the confirmation decided,
    and whether the ratio to the baseline stands."""
    d = winner.decision
    if d is None or not winner.confirmation:
        return {"confidence": "low", "decision": {
            "verdict": "not confirmed",
            "note": "one search measurement: no fresh runs re-measured it (--confirm 0, or the "
                    "budget ended first)"}}
    block: dict[str, Any] = {
        "verdict": d.verdict,
        "note": decision_note(winner),
        "runs": d.runs,
        # Fastest over slowest, as the warnings say "runs disagree by Nx"; `spread` elsewhere
        # in best.yaml is (max - min) / median, and "spread: 1.0" read as 100% for one run.
        "runs_apart": rounded(d.spread) if d.runs > 1 else None,
        "runner_up": d.runner_up,
        "runner_up_runs": d.runner_up_runs,
        "ratio": rounded(d.ratio),
        "interval": [rounded(v) for v in d.interval] if d.interval else None,
    }
    if d.tied:
        block["tied"] = list(d.tied)
        block["picked"] = ("the cheapest of the tied configs whose median is as near the "
                           "highest as that config's own runs are to each other: less peak "
                           "memory, then fewer workers, then no compile")
    block["baseline_runs_apart"] = rounded(d.baseline_spread)
    block["speedup_confirmed"] = d.speedup_confirmed
    block["speedup_interval"] = ([rounded(v) for v in d.speedup_interval]
                                 if d.speedup_interval else None)
    note = speedup_note(winner)
    if note:
        block["speedup_note"] = note
    warnings = spread_warnings(winner, unit)
    if warnings:
        block["warnings"] = warnings
    return {"confidence": d.confidence, "decision": block}


def spread_warnings(winner: Winner, unit: str) -> list[str]:
    """One line per confirmed config whose runs disagree, naming the cause measured during
    them (`contract.noise`); a config run once fresh is compared with its search trial."""
    out = []
    for c in winner.confirmation or ():
        results = (winner.runs or {}).get(c.trial, ())
        text = spread_warning(results, unit=unit) if len(c.throughputs) >= 2 and results else None
        runs = evidence(c)
        if text is None and disagreement(runs) >= DISAGREE:
            with_search = " counting its search trial" if len(c.throughputs) < 2 else ""
            cause = likely_cause(results)  # measured during its fresh run(s)
            why = (f"likely cause: {cause}" if cause else
                   "something besides the config changed the rate between runs")
            text = (f"runs disagree by {disagreement(runs):.3g}x ({human(min(runs))} to "
                    f"{human(max(runs))} {unit}/s{with_search}): {why}")
        if text is not None:
            out.append(f"trial {c.trial}: {text}")
    return out


def decision_note(winner: Winner) -> str:
    d = winner.decision
    assert d is not None  # checked by the caller
    if d.verdict == "clear lead":
        lead = (f"trial {winner.record.number} leads trial {d.runner_up} by {d.ratio:.3g}x "
                f"(95% interval {d.interval[0]:.3g}-{d.interval[1]:.3g}) over {d.runs} and "
                f"{d.runner_up_runs} fresh runs" if d.interval and d.ratio else "clear lead")
        if d.confidence == "low" and d.own_spread > SPREAD_WARNING:
            lead += (f"; but its own runs are {d.spread:.3g}x apart, so its rate is known no "
                     "better than that")
        return lead
    if d.verdict == "tie within noise":
        top = d.leader if d.leader is not None else winner.record.number
        how = (f"are within the noise of their runs, none shown more than 2% faster than "
               f"trial {top}" if d.confidence == "high" else "are within the noise of their runs")
        picked = (f"the cheapest, trial {winner.record.number}, is picked" if d.leader is not None
                  else f"trial {winner.record.number}, the highest median and the cheapest of "
                  "those as near it as its own runs are to each other, is picked")
        # A config faster by the search with no fresh run is said: a held-out MoE's tie (2-CPU
        # VM, 2026-11-28) handed back the defaults while a 1.31x config never ran again.
        above = _named(c for c in winner.confirmation or () if not c.statuses
                       and c.search_throughput > winner.throughput)
        unrun = f"; the budget left no fresh run for {above}" if above else ""
        return f"trials {', '.join(map(str, d.tied))} {how}; {picked}{unrun}"
    if d.verdict == "too few runs" and d.runs >= 2:
        return (f"ahead of every config run again, over {d.runs} fresh runs of its own, but the "
                f"budget left no fresh run for {_unrun_faster(winner)}, whose search rate says "
                "it may be faster")
    if d.verdict == "too few runs":
        return f"ahead, but the budget allowed {d.runs} fresh run(s) of it"
    if d.verdict == BASELINE_KEPT:
        lead = next((c for c in winner.confirmation or () if c.trial == d.runner_up), None)
        fresh = f" ({human(lead.median)})" if lead is not None and lead.median else ""
        return (f"the fresh runs of the leader, trial {d.runner_up}{fresh}, read below the "
                f"baseline's {human(winner.throughput)} in the search, and the budget left the "
                "baseline no fresh run: nothing shows a config faster than the defaults, which "
                "are kept (a longer --timeout runs both again)")
    return _only_one_note(winner)


def _unrun_faster(winner: Winner) -> str:
    """The configs without a fresh run that may still be faster than the winner, by name:
    "trial 3 (23.9k in the search)" (`lead.standing`'s contenders); "a config" when none is."""
    entries = list(winner.confirmation or ())
    contenders = set(standing(entries).contenders) if entries else set()
    return _named(c for c in entries if not c.statuses and c.trial in contenders) or "a config"


def _named(unrun: Iterable[ConfirmationEntry]) -> str:
    """Configs without a fresh run by name, the fastest by the search first, three at most:
    "trial 3 (23.9k in the search)"; "" for none."""
    ranked = sorted(unrun, key=lambda c: -c.search_throughput)[:3]
    return ", ".join(f"trial {c.trial} ({human(c.search_throughput)} in the search)"
                     for c in ranked)


def _only_one_note(winner: Winner) -> str:
    """Why no other config was compared: each failed its fresh runs, or gave way unrun to the
    winner's runs (a held-out GNN on a 2-CPU VM, 2026-11-27: a compiled contender's run could
    not fit the 30 s left, and "the only config whose fresh runs were ok" read as a failure)."""
    others = [c for c in winner.confirmation or () if c.trial != winner.record.number]
    unrun = [c.trial for c in others if not c.statuses]
    cut = [c.trial for c in others if c.statuses and set(c.statuses) <= _CUT]
    failed = [c.trial for c in others if c.statuses and c.trial not in cut]
    parts = []
    if unrun:
        parts.append(f"{_trials(unrun)} got no fresh run: the time left went to this one's")
    if cut:
        parts.append(f"the fresh runs of {_trials(cut)} were cut short (the budget's end, or a "
                     "stop)")
    if failed:
        parts.append(f"the fresh runs of {_trials(failed)} failed")
    return "; ".join(parts) or "the only config run again"


_CUT = {"timeout", "interrupted"}  # a fresh run's statuses that say time ran out, not the config


def _trials(numbers: list[int]) -> str:
    return ("trial " if len(numbers) == 1 else "trials ") + ", ".join(map(str, numbers))


def winner_phrases(winner: Winner) -> tuple[str, str]:
    """", 2.50x the baseline" (saying so when the baseline's runs disagree) and
    " (confidence high: clear lead)": how the end of a search names the winner's standing."""
    d = winner.decision
    speed = f", {winner.speedup:.2f}x the baseline" if winner.speedup else ""
    note = speedup_note(winner)
    if speed and note:
        speed += f" ({note})"
    if d is not None:
        return speed, f" (confidence {d.confidence}: {d.verdict})"
    if not winner.confirmation:
        # The defaults measured fastest: the confirmation had no config to hold against them.
        return speed, (" (not confirmed: no config measured faster than the baseline)"
                       if winner.record.baseline else " (not confirmed)")
    return speed, "" if note else " (confirmed by repeated runs)"


def speedup_note(winner: Winner) -> str | None:
    """Why the ratio to the baseline is not confirmed (None when it is, or nothing was
    confirmed): the baseline's own runs disagree 2x or more, it has no fresh run, or the
    winner's runs do not beat its beyond their noise (`Decision.speedup_clear`)."""
    base = next((c for c in winner.confirmation or () if c.baseline), None)
    if not winner.confirmation or not winner.baseline or winner.record.baseline:
        return None
    if base is None or not base.throughputs:
        return "not confirmed: the baseline has no fresh run"
    spread = disagreement(evidence(base))
    if spread >= DISAGREE:
        return f"not confirmed: the baseline's own runs disagree {spread:.1f}x"
    d = winner.decision
    if d is not None and not d.speedup_clear and d.speedup_interval:
        low, high = d.speedup_interval
        return (f"not confirmed: the winner's runs and the baseline's overlap ({low:.2f}-"
                f"{high:.2f}x)")
    return None
