"""The follow-ups not yet run (`starts.follow_ups`, the eager and one-shape stages), handed to
the study one at a time."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.contract.config import TrainConfig
from autotune.study.policy.starts import EAGER, FOLLOW, Start
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records

__all__ = ["Ladder"]


class Ladder:
    """The follow-ups not yet run, handed to the study one at a time.

    A new best's follow-ups go before those of the configs it beat: the climb follows the best
    at once (on the launch-bound grid, the baseline's eager larger batches ran before the
    CUDA-graph ones that the new best pointed at). Kept in this process only."""

    def __init__(self) -> None:
        self.pending: list[Start] = []
        self._urgent: list[Start] = []

    def add(self, starts: list[Start], *, new_best: bool, urgent: bool = False) -> None:
        """Urgent starts (a large expected gain) first, then a new best's, then the rest."""
        if urgent:  # first, also when already pending
            self._urgent += [s for s in starts if s not in self._urgent]
            self.pending = list(starts) + [s for s in self.pending if s not in starts]
            return
        fresh = [s for s in starts if s not in self.pending]
        kept = [s for s in self.pending if s not in fresh]
        first = [s for s in kept if s in self._urgent]
        rest = [s for s in kept if s not in self._urgent]
        self.pending = first + (fresh + rest if new_best else rest + fresh)

    def supersede(self) -> None:
        """A guided trial became the best: drop the follow-ups of the configs it beat (their
        climbs and checks), but the urgent ones. The new best's own follow-ups check the same
        knobs from where the search now stands; the old ones would measure a config already
        beaten with one knob changed (GPT-2 on an H100: 7 of 23 trials after the compile-scope
        check won, 2026-11-26)."""
        self.pending = [s for s in self.pending
                        if not s[0].startswith(FOLLOW) or s in self._urgent]

    def feed(self, study: optuna.Study, space: SearchSpace,
             skip: Callable[[TrainConfig], bool] | None = None,
             project: Callable[[TrainConfig], TrainConfig] | None = None) -> None:
        """Enqueue the next pending start unless the study already has one waiting: an eager
        dtype trial first, then in order; a start for which `skip` holds is dropped. While an
        eager trial runs (on another device), no compiled start: what to compile follows from
        every eager rate. `project` moves a start where the search now holds a knob (the
        adapter's batch, when its loader makes its own batches) before `skip` is asked."""
        trials = study.get_trials(deepcopy=False)
        if any(t.state == optuna.trial.TrialState.WAITING for t in trials):
            return
        eager_running = any(t.state == optuna.trial.TrialState.RUNNING
                            and records.read_role(t).startswith(EAGER) for t in trials)
        while self.pending:
            first = next((i for i, (role, _) in enumerate(self.pending)
                          if role.startswith(EAGER)), None)
            if first is None:
                first = next((i for i, (_, c) in enumerate(self.pending)
                              if not eager_running or c.compile == "none"), None)
            if first is None:
                return  # only compiled starts left, and an eager trial still runs
            role, config = self.pending.pop(first)
            if (role, config) in self._urgent:
                self._urgent.remove((role, config))
            if project is not None:
                config = project(config)
            if not records.role_taken(study, role) and not (skip is not None and skip(config)):
                records.enqueue_config(study, space.params_for(config), role)
                return
