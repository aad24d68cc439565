"""The search's last phase: run the leaders again in rounds (`rounds`), each run a fresh
process, and record which config wins (`Search._confirm`).

`ConfirmPhase` is the part of `Search` that picks the candidates, fits them to the time left,
claims the confirmation (searches on other hosts sharing the study confirm once, the last to
end), runs it and records it in the study. Like `SlotLoop`, a mixin whose methods work on the
search itself (its study, lock, settings, runners, listener, clock, `done`, `_step_over`), not
imported from search.py, to keep the package free of import cycles.
"""

from __future__ import annotations

from autotune.contract.result import TrialResult
from autotune.study.confirmation.rounds import (
    FRESH_PROCESS_SECONDS,
    Candidate,
    candidates,
    fit_to_time,
    record_confirmation,
    run_confirmation,
    run_seconds,
    start_costs,
)
from autotune.study.store import records
from autotune.study.store.claim import claim_confirmation, end_confirmation, wait_finished

__all__ = ["ConfirmPhase"]


class ConfirmPhase:
    """`Search`'s confirmation methods, apart (a mixin)."""

    def _candidates(self) -> list[Candidate]:
        if self.settings.confirm == 0:
            return []
        return candidates(records.read_records(self.study), self.settings.confirm)

    def _confirm(self, deadline: float | None) -> None:
        s = self.settings
        if s.confirm == 0:
            return
        # Searches sharing the study end their running trials first, and the last to end
        # confirms: a dead one's trial is failed by the heartbeat check meanwhile.
        wait = s.trial_timeout + s.heartbeat.grace + 30.0
        wait_finished(self.study, None, recover=self._step_over,
                      stop=lambda: self._signal is not None,
                      timeout=wait if deadline is None else min(wait, deadline - self.clock()))
        cands = self._candidates()
        if not any(not c.baseline for c in cands) or self._signal is not None:
            return  # nothing but the baseline ran ok: nothing to confirm
        if deadline is not None:  # fewer configs, so that the leader can run twice
            first, later, gap = self._confirm_costs()
            left = deadline - self.clock() - (first - later)  # the first run starts cold
            cands = fit_to_time(cands, left, lambda c: run_seconds(
                c, measure_gap_seconds=gap, start_seconds=later))
        # The longest the confirmation may take (each run's limit is at most the trial's).
        seconds = (s.confirm_max_repeats or s.confirm_repeats) * len(cands) * (
            s.trial_timeout + FRESH_PROCESS_SECONDS)
        self.confirmed_by = claim_confirmation(self.study, self.lock, done=self.done(),
                                               seconds=seconds)
        if self.confirmed_by is not None:
            return  # another search confirms these trials, or did
        finished = False
        try:
            self.listener.confirm_started(cands, s.confirm_repeats)
            runs: list[tuple[Candidate, TrialResult]] = []

            def on_result(cand: Candidate, result: TrialResult) -> None:
                runs.append((cand, result))
                self.listener.confirm_result(cand, result)

            summary = run_confirmation(
                cands, adapter=s.adapter, device=s.device, runner=self.confirm_runner,
                out=s.out, repeats=s.confirm_repeats, max_repeats=s.confirm_max_repeats,
                trial_timeout=s.trial_timeout, measure=s.confirm_measure or s.measure,
                seed=s.seed, on_result=on_result, deadline=deadline, clock=self.clock,
            )
            if self._signal is None:
                record_confirmation(self.study, summary, runs)
                finished = True
        finally:
            end_confirmation(self.study, self.lock, finished=finished)

    def _confirm_costs(self) -> tuple[float, float, float]:
        """What a confirmation run is planned to pay beyond its search trial: the first run's
        start-up, each later run's, and the confirmation's longer measurement (its budget less
        the search's)."""
        s = self.settings
        first, later = start_costs(self.runner, self.confirm_runner)
        confirm = s.confirm_measure or s.measure
        return first, later, max(0.0, confirm.budget_seconds - s.measure.budget_seconds)
