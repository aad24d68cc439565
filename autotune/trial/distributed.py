"""One rank of a DDP trial, started by PyTorch's launcher:

    python -m torch.distributed.run --standalone --nproc-per-node N \\
        -m autotune.trial.distributed TRIAL_DIR

It runs the trial as one rank (`autotune.trial.rank.Rank`: lockstep measurement, the outcome
agreed by every rank), writes its pid and its own outcome (`autotune.contract.ranks`), and on
rank 0 the agreed `result.json` and the `events.jsonl` of the global windows.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from autotune.contract.ranks import RankOutcome, pid_path
from autotune.contract.request import LAUNCH_ENV, TrialRequest
from autotune.trial.lifetime import die_with_parent
from autotune.trial.rank import Rank

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    launched = float(os.environ.get(LAUNCH_ENV) or time.time())
    started = time.perf_counter() - max(0.0, time.time() - launched)
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "RANK" not in os.environ:
        print("usage: python -m torch.distributed.run --nproc-per-node N -m "
              "autotune.trial.distributed TRIAL_DIR", file=sys.stderr)
        return 2
    die_with_parent()  # the launcher's child: dies with it, even when it is SIGKILLed
    trial_dir = Path(args[0])
    request = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    rank = Rank(request)
    path = pid_path(trial_dir, rank.rank)
    path.parent.mkdir(exist_ok=True)
    path.write_text(str(os.getpid()))  # torchrun made it a session leader: its group's id

    from autotune.trial.worker import run_trial

    events = trial_dir / "events.jsonl" if rank.rank == 0 else None
    result = run_trial(request, events, started=started, rank=rank)
    result = result.replace(duration_seconds=time.perf_counter() - started)
    outcome = RankOutcome(rank=rank.rank, result=result, waited=rank.waited)
    outcome.save(trial_dir)  # before agreeing: a rank that dies there still left its outcome
    agreed = rank.agree(outcome)
    if agreed is not None and rank.rank == 0:
        agreed.save(trial_dir / "result.json")
    print(f"autotune trial {request.number} rank {rank.rank}: {result.status.value} "
          f"{result.reason}".rstrip(), flush=True)
    if agreed is None:
        # A non-zero exit makes the launcher stop the other ranks now; no clean-up of a process
        # group whose peers are gone (it could wait on them).
        sys.stdout.flush()
        os._exit(1)
    rank.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
