"""How a trial runs: its slot, its process (fresh, forked, spare or DDP ranks); no Optuna."""
