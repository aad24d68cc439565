"""The adapter's own knobs in a space: declarations read with the space file's parser, every
wrong declaration refused before a trial with the file, the knob and the fix, the space file's
`adapter:` entries, sampling them with the tool's knobs, and what `affects:` changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune import Adapter, InputError, TrainConfig
from autotune.study.objective import Objective
from autotune.study.space.file import SearchSpace, parse_space

SOURCE = "spaces/my_space.yaml"
TOOL = {"batch_size": {"factors": [1, 2]}, "compile": {"choices": ["none", "default"]}}


class Knobs(Adapter):
    batch_size = 8
    knobs = {"pad": {"choices": [None, 64, 1024], "affects": "loader"},
             "attn": {"choices": ["sdpa", "eager"], "affects": "model", "default": "eager"},
             "depth": {"low": 1, "high": 3, "when": "attn == sdpa"}}


def adapter_with(knobs: Any) -> type[Adapter]:
    return type("Declared", (Adapter,), {"batch_size": 8, "knobs": knobs})


def space(raw: dict[str, Any] | None = None, adapter: type[Adapter] = Knobs) -> SearchSpace:
    return parse_space(raw or TOOL, source=SOURCE, adapter=adapter, device_type="cpu", cpus=4)


def test_the_baseline_runs_the_defaults_first_choice_default_or_low() -> None:
    s = space()
    assert s.baseline.params == {"pad": None, "attn": "eager", "depth": 1}
    assert s.baseline == TrainConfig(batch_size=8, params={"pad": None, "attn": "eager",
                                                           "depth": 1})
    assert Knobs().params == s.baseline.params  # outside a trial: the same defaults
    assert [k.name for k in s.knobs][-3:] == ["pad", "attn", "depth"]
    assert s.loader_only == {"pad"}


def test_the_grid_crosses_them_with_the_tools_and_honours_when() -> None:
    grid = space().enumerate()
    # compile 2 x pad 3 x (attn eager, or sdpa with depth 1-3: 4); batch 16 cannot keep 8
    assert len(grid) == 2 * 3 * 4 == len(set(grid))
    assert {c.params["depth"] for c in grid if c.params["attn"] == "eager"} == {1}
    assert {(c.params["pad"], c.compile) for c in grid} >= {(1024, "default"), (None, "none")}


def test_sampled_configs_carry_them_and_are_held_by_the_space() -> None:
    s = space()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(20):
        trial = study.ask()
        config = s.suggest(trial)
        assert set(config.params) == {"pad", "attn", "depth"}
        assert config.params["pad"] == trial.params["pad"]
        assert s.holds(config) and s.config_from_params(s.params_for(config)) == config
        study.tell(trial, 1.0)


def test_a_recipe_without_them_is_projected_to_the_defaults() -> None:
    s = space()
    projected = s.project(TrainConfig(batch_size=8, compile="default"))
    assert projected.params == s.baseline.params and projected.compile == "default"
    assert s.changed(projected, compile="none").params == s.baseline.params


def test_the_space_file_narrows_them_under_adapter() -> None:
    s = space({**TOOL, "adapter": {"pad": {"choices": [1024]}}})
    pad = next(k for k in s.knobs if k.name == "pad")
    assert pad.choices == (1024,) and pad.affects == "loader"  # affects kept
    assert s.baseline.params["pad"] == 1024


def test_a_tool_knob_may_depend_on_one_of_them() -> None:
    s = space({"batch_size": {"factors": [1]},
               "compile": {"choices": ["none", "default"], "when": "pad == 1024"}})
    assert {(c.params["pad"], c.compile) for c in s.enumerate()} == {
        (None, "none"), (64, "none"), (1024, "none"), (1024, "default")}


def test_a_loader_only_knob_keeps_the_compile_cache_key_a_model_knob_changes_it() -> None:
    s = space()
    objective = Objective(adapter=Path("a.py"), device="cpu", out=Path("out"), runner=None,  # type: ignore[arg-type]
                          measure=None, finished=list, loader_only=s.loader_only)  # type: ignore[arg-type]
    base = s.changed(s.baseline, compile="default")
    padded = s.changed(base, pad=1024)
    sdpa = s.changed(base, attn="sdpa")
    assert padded != base and objective.graph(padded) == objective.graph(base)
    assert objective.graph(sdpa) != objective.graph(base)
    assert objective.graph(s.baseline) is None  # nothing compiled


WRONG = [
    ("a list", ["pad"], "must be a dict of knob name -> entry"),
    ("true and 1", {"pad": {"choices": [True, 1]}}, "equal in Python but of different types"),
    ("a fraction default of a range", {"n": {"low": 1, "high": 8, "default": 3.5}},
     "default 3.5 is not among its values"),
    ("a bool default of a range", {"n": {"low": 1, "high": 8, "default": True}},
     "default True is not among its values"),
    ("not an entry", {"pad": [1, 2]}, "'pad']: expected an entry like"),
    ("unknown field", {"pad": {"choices": [1], "values": [2]}}, "unknown field(s) ['values']"),
    ("no domain", {"pad": {"affects": "loader"}}, "give exactly one of"),
    ("empty choices", {"pad": {"choices": []}}, "'choices' is empty; list at least one value"),
    ("a tool knob's name", {"compile": {"choices": [1]}},
     "'compile' is a knob of the tool; rename yours"),
    ("not an identifier", {"pad to": {"choices": [1]}}, "a knob's name is an identifier"),
    ("bad affects", {"pad": {"choices": [1], "affects": "data"}},
     "affects must be one of ['loader', 'model', 'both']"),
    ("bad when", {"pad": {"choices": [1], "when": "pad >"}}, "'pad'].when: cannot parse"),
    ("unknown knob in when", {"pad": {"choices": [1], "when": "padding == 1"}},
     "'padding' in 'padding == 1' is neither a knob of the tool nor another"),
    ("a value that is a list", {"pad": {"choices": [[1, 2]]}},
     "choices are null, true/false, numbers or strings"),
    ("default out of its values", {"pad": {"choices": [1], "default": 2}},
     "default 2 is not among its values"),
    ("reversed range", {"pad": {"low": 4, "high": 1}}, "low=4 is greater than high=1; swap them"),
]


@pytest.mark.parametrize(("what", "knobs", "message"), WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_declaration_names_the_adapter_file_the_knob_and_the_fix(
        what: str, knobs: Any, message: str) -> None:
    with pytest.raises(InputError) as err:
        space(adapter=adapter_with(knobs))
    text = str(err.value)
    assert message in text
    assert text.startswith(f"{__file__}: Declared.knobs"), text


def test_an_adapter_entry_of_the_space_must_name_a_declared_knob() -> None:
    with pytest.raises(InputError, match=r"key 'adapter.padding': Knobs .* declares no knob "
                       r"'padding'; its knobs: \['attn', 'depth', 'pad'\]"):
        space({**TOOL, "adapter": {"padding": {"choices": [1]}}})
    with pytest.raises(InputError, match=r"key 'adapter.pad': unknown field\(s\) \['value'\]"):
        space({**TOOL, "adapter": {"pad": {"value": 1}}})
