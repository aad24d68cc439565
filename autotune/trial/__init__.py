"""The trial side: what runs in the child process (torch and the user's adapter; never optuna,
rich or matplotlib)."""
