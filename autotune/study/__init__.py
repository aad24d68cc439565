"""The study side: the parent process (Optuna, the search loop, runners, confirmation).

The loop is here (`search`, `parallel`, `objective`, `settings`, `opening`, `interrupts`); below
it, in rooms: `confirmation` and `policy`, over `store`, over `space` and `execution`.
"""
