"""Which trials of a recorded search the overhead-bound rule would not have run, and the seconds
they cost there.

    python benchmarks/search/implied_slow.py OUT/study.db [more.db ...]

Needs the study.db of a search run (`autotune search --out OUT` writes OUT/study.db). results/
commits none: the databases of h100/implied-slow/implied-slow.txt are in git history, e.g.
`git show f55b64a:results/h100/search/tinyblocks/study.db > tinyblocks.db`.

Walks the search's trials in order and asks `Objective.overhead_ceiling` of each config what the
trials finished before it imply: a smaller batch behind an overhead-bound trial in the same
compile mode, whose bound stays under the pruner's bar. For each such trial it prints the bound
next to what the trial measured (a partial rate when pruned), so the bound can be checked
against the measurement it replaced. Reads the study only; runs nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from autotune.contract.request import MeasureSettings  # noqa: E402
from autotune.study.objective import Objective  # noqa: E402
from autotune.study.store import records  # noqa: E402


def check(db: Path) -> tuple[int, float, list[str]]:
    storage = f"sqlite:///{db.resolve()}"
    (name,) = optuna.study.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    trials = sorted((r for r in records.read_records(study) if r.search), key=lambda r: r.number)
    objective = Objective(adapter=Path("-"), device="cuda", out=Path("-"), runner=None,  # type: ignore[arg-type]
                          measure=MeasureSettings(), finished=list, infer_slow=True)
    lines, seconds = [], 0.0
    for i, trial in enumerate(trials):
        if trial.config is None or trial.result is None or trial.duplicate_of is not None:
            continue
        before = [t for t in trials[:i] if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        implied = objective.overhead_ceiling(trial.config, before)
        if implied is None:
            continue
        ceiling, by = implied
        cost = trial.result.duration_seconds or 0.0
        seconds += cost
        rate = trial.result.throughput
        lines.append(f"  #{trial.number} bs={trial.config.batch_size} compile={trial.config.compile}: "
                     f"{trial.result.status.value} at {rate:,.0f}/s, bound {ceiling:,.0f}/s by "
                     f"#{by.number} ({'holds' if rate is None or rate <= ceiling else 'BROKEN'}), "
                     f"{cost:.0f} s")
    return len(lines), seconds, lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("studies", type=Path, nargs="+", help="a search's study.db")
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    missing = [str(db) for db in args.studies if not db.is_file()]
    if missing:  # SQLite would create an empty study in its place
        print(f"no such study.db: {', '.join(missing)}. This replays the study.db a search wrote "
              "(autotune search --out OUT writes OUT/study.db); results/ commits none, the ones "
              "behind results/h100/implied-slow/ are in git history (git show "
              "f55b64a:results/h100/search/tinyblocks/study.db > tinyblocks.db)", file=sys.stderr)
        return 1
    for db in args.studies:
        count, seconds, lines = check(db)
        print(f"{db}: {count} trial(s) not run, {seconds:.0f} s of the search saved")
        print("\n".join(lines)) if lines else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
