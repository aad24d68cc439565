"""`autotune check`: a performance gate. Re-run a tuned config in fresh processes, compare the
median with a stored figure (best.yaml's, or a baseline file), and say whether the rate holds."""
