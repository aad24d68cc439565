"""TrainConfig: validation, YAML round-trip, `read_config` errors, the allocator environment.

The helpers production code calls (`autotune.load_config` -> `TunedConfig`) are tested in
tests/trial/test_production.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import InputError, TrainConfig
from autotune.contract.config import read_config

FULL = TrainConfig(
    batch_size=64,
    grad_accum=2,
    num_workers=3,
    prefetch_factor=4,
    pin_memory=True,
    persistent_workers=True,
    amp_dtype="bf16",
    compile="max-autotune",
    checkpoint=0.5,
    expandable_segments=True,
    max_split_size_mb=512,
)


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(InputError) as excinfo:
        read_config(path)
    message = str(excinfo.value)
    assert str(path) in message, message
    return message


# -- the dataclass ---------------------------------------------------------------------------------


def test_defaults_are_pytorchs() -> None:
    config = TrainConfig(batch_size=8)
    assert config.to_dict() == {
        "batch_size": 8, "grad_accum": 1, "num_workers": 0, "prefetch_factor": None,
        "pin_memory": False, "persistent_workers": False, "intra_op_threads": None,
        "amp_dtype": "fp32", "compile": "none", "compile_scope": "model",
        "checkpoint": 0.0, "expandable_segments": False, "max_split_size_mb": None,
        # DistributedDataParallel's own defaults.
        "bucket_cap_mb": None, "gradient_as_bucket_view": False, "static_graph": False,
        # The step's kernels as PyTorch picks them.
        "optimizer_impl": "default", "memory_format": "contiguous", "sdpa_backend": "default",
        "cudnn_benchmark": False,
    }


def test_frozen_and_keyword_only() -> None:
    with pytest.raises(AttributeError):
        FULL.batch_size = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        TrainConfig(8)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.0}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"grad_accum": 0}, "grad_accum"),
        ({"num_workers": -1}, "num_workers"),
        ({"prefetch_factor": 2}, "prefetch_factor"),  # without workers
        ({"num_workers": 2, "prefetch_factor": 0}, "prefetch_factor"),
        ({"persistent_workers": True}, "persistent_workers"),  # without workers
        ({"amp_dtype": "fp8"}, "amp_dtype"),
        ({"compile": "fast"}, "compile"),
        ({"checkpoint": 1.5}, "checkpoint"),
        ({"max_split_size_mb": 20}, "max_split_size_mb"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(changes: dict[str, Any], field: str) -> None:
    values = {"batch_size": 8, **changes}
    with pytest.raises(ValueError, match=rf"\b{field}\b.*=") as excinfo:
        TrainConfig(**values)
    assert not isinstance(excinfo.value, InputError)


def test_replace() -> None:
    assert FULL.replace(batch_size=16).batch_size == 16
    with pytest.raises(ValueError, match="prefetch_factor"):
        FULL.replace(num_workers=0, persistent_workers=False)


# -- dict and YAML round-trip ----------------------------------------------------------------------


@pytest.mark.parametrize("config", [TrainConfig(batch_size=8), FULL], ids=["defaults", "every-knob"])
def test_dict_round_trip(config: TrainConfig) -> None:
    assert TrainConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("config", [TrainConfig(batch_size=8), FULL], ids=["defaults", "every-knob"])
def test_best_yaml_round_trip(tmp_path: Path, config: TrainConfig) -> None:
    # The shape outputs.best.best_document writes: the knobs under `config:`, facts beside them.
    path = write_yaml(tmp_path / "best.yaml", {
        "config": config.to_dict(),
        "env": {"PYTORCH_CUDA_ALLOC_CONF": config.alloc_conf},
        "throughput": {"value": 1234.5, "unit": "samples/s"},
    })
    assert read_config(path) == config


def test_knobs_only_yaml_round_trip(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "knobs.yaml", FULL.to_dict())
    assert read_config(path) == FULL


def test_partial_yaml_takes_defaults(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "knobs.yaml", {"batch_size": 16, "amp_dtype": "bf16"})
    assert read_config(path) == TrainConfig(batch_size=16, amp_dtype="bf16")


def test_from_dict_names_source_and_key() -> None:
    with pytest.raises(InputError, match=r"^here: key 'grad_accum' must be an integer"):
        TrainConfig.from_dict({"batch_size": 8, "grad_accum": "2"}, source="here")


def test_from_dict_not_a_mapping() -> None:
    with pytest.raises(InputError, match="here: expected a mapping"):
        TrainConfig.from_dict([1, 2], source="here")  # type: ignore[arg-type]


# -- bad files ---------------------------------------------------------------------------------------


def test_unknown_key(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "best.yaml", {"config": {"batch_size": 8, "num_worker": 2}})
    message = load_error(path)
    assert "num_worker" in message and "num_workers" in message  # the typo and the right name


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_workers", "2"),
        ("num_workers", True),
        ("pin_memory", 1),
        ("pin_memory", "yes please"),
        ("prefetch_factor", 2.5),
        ("amp_dtype", 16),
        ("checkpoint", "half"),
        ("checkpoint", True),
    ],
)
def test_wrong_type(tmp_path: Path, key: str, value: Any) -> None:
    data = {"batch_size": 8, "num_workers": 2, key: value}
    path = write_yaml(tmp_path / "best.yaml", {"config": data})
    message = load_error(path)
    assert repr(key) in message


def test_missing_batch_size(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "best.yaml", {"config": {"num_workers": 2}})
    assert "'batch_size'" in load_error(path)


def test_invalid_value(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "knobs.yaml", {"batch_size": 8, "amp_dtype": "fp8"})
    assert "amp_dtype" in load_error(path)


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text("config: {batch_size: 8\n")
    assert "not valid YAML" in load_error(path)


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text("- batch_size\n")
    load_error(path)


def test_missing_file(tmp_path: Path) -> None:
    load_error(tmp_path / "nope.yaml")


def test_read_config_uses_safe_yaml(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    path = tmp_path / "best.yaml"
    path.write_text(f'config: !!python/object/apply:os.system ["touch {marker}"]\n')
    load_error(path)
    assert not marker.exists()


# -- what production code uses ---------------------------------------------------------------------


def test_alloc_conf_and_env() -> None:
    assert TrainConfig(batch_size=8).alloc_conf == ""
    assert TrainConfig(batch_size=8).env == {}
    assert TrainConfig(batch_size=8, expandable_segments=True).alloc_conf == "expandable_segments:True"
    assert TrainConfig(batch_size=8, max_split_size_mb=128).alloc_conf == "max_split_size_mb:128"
    assert FULL.alloc_conf == "expandable_segments:True,max_split_size_mb:512"
    assert FULL.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512"}


def test_params_in_both_places_of_a_best_yaml_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text("config: {batch_size: 8, params: {a: 1}}\nparams: {b: 2}\n")
    with pytest.raises(InputError, match="params both under config: and at the top"):
        read_config(path)
