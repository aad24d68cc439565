"""The study side: the parent process (Optuna, the search loop, runners, confirmation)."""
