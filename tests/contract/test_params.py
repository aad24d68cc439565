"""The adapter's own knobs' values: `Params`, the `params` field of `TrainConfig` (equality,
hashing, serialization, the compile-cache key, the one-line description), their defaults, and
adapters built with them (`instantiate`), the dataset a fork server built reused or not."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from autotune import Adapter, InputError, TrainConfig
from autotune.contract.config import KNOB, read_config
from autotune.contract.params import (Built, Params, built_state, default_params, instantiate,
                                      restored, same_dataset)

DECLARED = {"pad": {"choices": [None, 64], "affects": "loader"},
            "attn": {"choices": ["sdpa", "eager"], "default": "eager", "affects": "model"},
            "depth": {"low": 2, "high": 4}}


def test_params_are_an_immutable_hashable_mapping_equal_in_any_order() -> None:
    a, b = Params({"x": 1, "y": None}), Params([("y", None), ("x", 1)])
    assert a == b == {"x": 1, "y": None} and hash(a) == hash(b)
    assert list(a) == ["x", "y"] and a["x"] == 1 and len(a) == 2
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(TypeError):
        a["x"] = 2  # type: ignore[index]
    with pytest.raises(ValueError, match="null, true/false, numbers or strings"):
        Params({"x": [1]})


def test_a_config_carries_them_through_dicts_yaml_and_equality() -> None:
    config = TrainConfig(batch_size=8, compile="default", params={"pad": 64, "attn": "sdpa"})
    assert config.params == {"attn": "sdpa", "pad": 64}
    assert "params" not in KNOB  # not a row of the tool's knob table
    data = config.to_dict()
    assert data["params"] == {"attn": "sdpa", "pad": 64} and type(data["params"]) is dict
    assert TrainConfig(**data) == config and hash(TrainConfig(**data)) == hash(config)
    assert TrainConfig.from_dict(yaml.safe_load(yaml.safe_dump(data))) == config
    assert config != config.replace(params={"pad": None, "attn": "sdpa"})
    assert TrainConfig(batch_size=8).params == {}
    assert config.describe() == "bs=8 fp32 compile=default attn=sdpa pad=64"
    assert config.graph is not None and config.params in config.graph  # refined by `affects`
    with pytest.raises(InputError, match="'params' must be a mapping"):
        TrainConfig.from_dict({"batch_size": 8, "params": [1]})
    with pytest.raises(InputError, match="numbers or strings"):
        TrainConfig.from_dict({"batch_size": 8, "params": {"pad": {"a": 1}}})


def test_best_yaml_params_block_is_read_with_its_config(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump({"config": {"batch_size": 8}, "params": {"pad": 64}}))
    assert read_config(path) == TrainConfig(batch_size=8, params={"pad": 64})
    path.write_text(yaml.safe_dump({"config": {"batch_size": 8}}))
    assert read_config(path).params == {}


def test_defaults_are_the_default_else_the_first_choice_else_low() -> None:
    assert default_params(DECLARED) == {"pad": None, "attn": "eager", "depth": 2}
    assert default_params({}) == {}
    with pytest.raises(ValueError, match="each entry is a dict with 'choices'"):
        default_params({"pad": {"choices": []}})  # the search's own check says more


class Declares(Adapter):
    knobs: ClassVar[dict[str, Any]] = DECLARED

    def __init__(self) -> None:
        self.at_init = dict(self.params)


def test_an_adapter_reads_its_values_from_before_init() -> None:
    adapter = instantiate(Declares, {"pad": 64})
    assert adapter.at_init == adapter.params == {"pad": 64, "attn": "eager", "depth": 2}
    assert Declares().params == {"pad": None, "attn": "eager", "depth": 2}  # no trial: defaults
    assert Adapter().params == {}
    with pytest.raises(ValueError, match=r"declares no knob\(s\) \['padding'\]"):
        instantiate(Declares, {"padding": 64})
    # The public way in production (`a.params = ...` is a read-only property: a held-out user's
    # first try failed with AttributeError, 2026-11-28).
    made = Declares.with_params({"depth": 4})
    assert isinstance(made, Declares) and made.at_init == made.params == {
        "pad": None, "attn": "eager", "depth": 4}


@pytest.mark.parametrize(("params", "same"), [
    ({}, True),
    ({"pad": None, "attn": "eager", "depth": 2}, True),  # the defaults
    ({"attn": "sdpa"}, True),  # model only
    ({"pad": 64}, False),  # the loader's
    ({"depth": 3}, False),  # both, by default
])
def test_a_preloaded_dataset_is_reused_only_when_no_loader_knob_moved(
        params: dict[str, Any], same: bool) -> None:
    assert same_dataset(DECLARED, params) is same


def test_built_state_is_what_the_build_set_or_rebound_on_the_adapter() -> None:
    class Holder:
        def __init__(self) -> None:
            self._params = {"k": 1}
            self.kept = [1]
            self.rebound: list[int] | None = None

        def dataset(self) -> list[int]:
            self.rebound = self.kept * 2
            self.lengths = [3, 1, 2]
            self.kept.append(2)  # changed in place: a fresh __init__ would give [1]
            return self.lengths

    holder = Holder()
    built, state = built_state(holder, holder.dataset)
    assert built == [3, 1, 2]
    assert state == {"rebound": [1, 1], "lengths": [3, 1, 2], "kept": [1, 2]}
    # Set on a trial's adapter where its dataset() would have run, not before.
    other = Holder()
    assert restored(other, Built(built, state)) is built and other.kept == [1, 2]
    assert restored(other, built) is built  # built here: nothing to set
