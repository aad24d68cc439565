"""The contract: what crosses the process boundary. Imports no torch, optuna or rich."""
