"""One small `apply_*` function per knob family; `autotune.compose` fixes their order."""
