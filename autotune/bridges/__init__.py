"""Adapters built from other frameworks' training code: `autotune.bridges.lightning`.

Adapter-level code that runs on the trial side: it imports the adapter contract, never the
study, the outputs, optuna or rich; the framework itself is imported only where it is used.
"""
