"""autotune: find, by measurement, the fastest training configuration for a PyTorch step.

The package is layered along the process boundary (see docs/how-it-is-built.md):
`contract` (what crosses it), `adapter` (what users implement), `trial` (the child: torch and
the user's code), `study` (the parent: Optuna), `outputs`, and `cli`/`lab` on top.
"""

from autotune.adapter import Adapter, load_adapter
from autotune.contract.config import TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.noise import Noise
from autotune.contract.request import MeasureSettings
from autotune.contract.result import Diagnosis, Fingerprint, HostCpu, Status, TrialResult, Verdict
from autotune.trial.measure import Measurement, measure
from autotune.trial.oom import is_oom_error
from autotune.trial.production import TunedConfig, load_config

__all__ = [
    "Adapter",
    "Diagnosis",
    "Fingerprint",
    "HostCpu",
    "InputError",
    "MeasureSettings",
    "Measurement",
    "Noise",
    "Status",
    "TrainConfig",
    "TrialResult",
    "TunedConfig",
    "Verdict",
    "is_oom_error",
    "load_adapter",
    "load_config",
    "measure",
]

__version__ = "0.1.0"
