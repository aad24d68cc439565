"""What crosses to the profile process and back: the request, and a best.yaml's diagnosis."""

from __future__ import annotations

import pytest
import yaml
from helpers import REPO_ROOT

from autotune import TrainConfig
from autotune.contract.profile import ProfileRequest, ProfileSettings, read_diagnosis
from autotune.contract.request import TrialRequest
from autotune.contract.result import Verdict

INPUT_BOUND = REPO_ROOT / "results/h100/search/resnet-cheap-first/best.yaml"


def test_the_request_round_trips_with_a_recorded_diagnosis() -> None:
    doc = yaml.safe_load(INPUT_BOUND.read_text())
    request = ProfileRequest(
        trial=TrialRequest(adapter="a.py", config=TrainConfig(batch_size=4), device="cpu"),
        settings=ProfileSettings(active=2, tensorboard=True),
        diagnosis=read_diagnosis(doc["diagnosis"]))
    assert request.diagnosis is not None and request.diagnosis.verdict is Verdict.INPUT
    assert ProfileRequest.from_dict(request.to_dict()) == request


@pytest.mark.parametrize("block", [None, {}, "input-bound", {"verdict": "sideways"},
                                   {"verdict": "input-bound"}])
def test_a_block_that_is_no_diagnosis_reads_as_none(block: object) -> None:
    assert read_diagnosis(block) is None


def test_the_schedule_needs_an_active_step() -> None:
    with pytest.raises(ValueError, match="active"):
        ProfileSettings(active=0)
