"""What the study keeps: its storage, typed records, the lock and claims, stale-trial recovery."""
