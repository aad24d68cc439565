"""An exploration: a random config of the space the search has not measured, queued after a
trial that bought nothing new (a copy, a config implied slow, one too slow to start)."""

from __future__ import annotations

from autotune.contract.config import TrainConfig
from autotune.contract.request import known_incompatible
from autotune.study.confirmation.winner import best_and_baseline
from autotune.study.objective import Objective
from autotune.study.policy.eager import cannot_win, recompiling
from autotune.study.policy.headroom import compile_may_pay
from autotune.study.policy.ladder import Ladder
from autotune.study.policy.refused import refused
from autotune.study.policy.sampler import held
from autotune.study.policy.start_cost import eager_seconds
from autotune.study.policy.starts import unmeasured
from autotune.study.space.bound import SearchSpace

__all__ = ["exploration"]


def exploration(objective: Objective, space: SearchSpace, ladder: Ladder, *, device: str,
                seed: int | None, left: float | None, no_compile_fits: bool
                ) -> TrainConfig | None:
    """A random config not measured yet nor implied slow, so that the budget buys new
    configurations (the sampler, converged on a small space, proposes what it measured); none
    when every config is. `left`: after a config too slow to start in the seconds left, one
    that compiles nothing new and whose knob values fit in them (`eager_seconds`: a held-out
    DeepLabV3 on an H200 filled its last 13 s with ten "not run" rows, this exploration among
    them with cuDNN's benchmark, 37 s, where configs of 9 s fit). It holds what the sampler holds
    (`held`, with `no_compile_fits`). While the best is input-bound, nothing compiled where a
    compile cannot pay (`headroom.compile_may_pay`: on a CPU, or a model that outpaces its
    loader; the quick start spent 18 s of 140 compiling a random config at 5.0k against the
    best's 8.1k). `seed`: the draw's."""
    done = objective.finished()  # read once: the predicate runs for every draw
    best, _ = best_and_baseline(done)
    loader_bound = best is not None and not compile_may_pay(best, device)
    hold = held(done, space.values, no_compile_fits=no_compile_fits)

    def fits(c: TrainConfig, seconds: float) -> bool:
        slow = eager_seconds(c, done)
        return objective.cold_compile(c, done) is None and (slow is None or slow[0] <= seconds)

    return unmeasured(
        space, seed=seed,
        new=lambda c: (objective.measured_before(c, done) is None
                       and objective.memory_wall(c, done) is None
                       and objective.overhead_ceiling(c, done) is None
                       and cannot_win(c, done) is None
                       and recompiling(c, done) is None
                       and refused(c, done, device) is None
                       and all(getattr(c, k) == v for k, v in hold.items())
                       and known_incompatible(c, device) is None
                       and (left is None or fits(c, left))
                       and not (loader_bound and c.compile != "none")
                       and all(c != p for _, p in ladder.pending)))
