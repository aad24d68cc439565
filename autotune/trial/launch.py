"""PyTorch's launcher, `torch.distributed.run`, that dies with the search that started it.

    python -m autotune.trial.launch --standalone --nproc-per-node N -m autotune.trial.distributed DIR

The arguments are torchrun's own, run by torchrun's own `main`; the one addition is that this
process dies with its parent (as a single-process trial does, `lifetime.die_with_parent`), so a
search killed with SIGKILL takes the launcher with it, the launcher its ranks (they die with
their parent too) and the ranks their DataLoader workers.
"""

from __future__ import annotations

import sys

from autotune.trial.lifetime import die_with_parent

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    die_with_parent()
    from torch.distributed.run import main as torchrun

    torchrun(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
