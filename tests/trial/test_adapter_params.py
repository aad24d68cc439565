"""The adapter's own knobs in the trial process: every method reads the trial's values, from
`__init__` on; a fork server's dataset (built at the defaults) is reused only when no knob that
acts on the loader moved."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import TEST_ADAPTERS

from autotune import MeasureSettings, TrainConfig, load_adapter
from autotune.contract.request import TrialRequest
from autotune.trial import steps
from autotune.trial.progress import Progress

PATH = TEST_ADAPTERS / "slow_knob.py"


def request(params: dict[str, str], adapter: Path = PATH) -> TrialRequest:
    return TrialRequest(adapter=str(adapter), config=TrainConfig(batch_size=8, params=params),
                        device="cpu", measure=MeasureSettings(), number=1)


def test_every_method_reads_the_trials_values() -> None:
    cls = load_adapter(PATH)
    config = TrainConfig(batch_size=8, params={"forward": "fast"})
    step = steps.build(cls, None, config, torch.device("cpu"), Progress(None, None), None)
    try:
        step()
        seen = step.adapter.seen  # type: ignore[attr-defined]
        assert set(seen) == {"__init__", "dataset", "loader_args", "model", "optimizer",
                             "loss", "items"}
        assert all(params == {"forward": "fast"} for params in seen.values()), seen
        assert type(step.model) is torch.nn.Linear  # not the slow one
    finally:
        step.close()


def test_a_preloaded_dataset_is_reused_for_a_model_knob_only() -> None:
    cls = load_adapter(PATH)
    dataset = object()
    preloaded = steps.Preloaded(adapter_path=str(PATH), adapter_cls=cls, dataset=dataset)
    assert steps.load(request({"forward": "fast"}), preloaded) == (cls, dataset)  # model only
    loader = type("LoaderKnob", (cls,), {"knobs": {"forward": {
        "choices": ["slow", "fast"], "affects": "loader"}}})
    preloaded = steps.Preloaded(adapter_path=str(PATH), adapter_cls=loader, dataset=dataset)
    assert steps.load(request({"forward": "slow"}), preloaded) == (loader, dataset)  # defaults
    assert steps.load(request({"forward": "fast"}), preloaded) == (loader, None)  # built again
