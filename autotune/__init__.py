"""autotune: find, by measurement, the fastest training configuration for a PyTorch step."""

from autotune.adapter import Adapter, load_adapter
from autotune.config import TrainConfig, load_config
from autotune.errors import InputError
from autotune.measure import MeasureSettings, Measurement, measure
from autotune.oom import is_oom_error
from autotune.result import Status, TrialResult
from autotune.space import SearchSpace, load_space

__all__ = [
    "Adapter",
    "InputError",
    "MeasureSettings",
    "Measurement",
    "SearchSpace",
    "Status",
    "TrainConfig",
    "TrialResult",
    "is_oom_error",
    "load_adapter",
    "load_config",
    "load_space",
    "measure",
]

__version__ = "0.1.0"
