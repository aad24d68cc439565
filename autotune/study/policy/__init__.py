"""How the search chooses: where it starts, what it prunes, what it tells Optuna, the sampler."""
