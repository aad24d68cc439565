"""One small `apply_*` function per knob family; `autotune.trial.compose` fixes their order."""
