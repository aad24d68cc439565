"""A compile that compiled nothing (Dynamo skipped the model: nn.GRU) holds `compile` at none
and refuses other compile modes unrun: each would measure eager again (2026-11-28)."""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from autotune import Status, TrainConfig, TrialResult
from autotune.study.policy.no_graph import nothing_held, nothing_refused
from autotune.study.policy.refused import refused
from autotune.study.policy.sampler import held
from autotune.study.store.records import TrialRecord

EAGER = TrainConfig(batch_size=8)
COMPILED = EAGER.replace(compile="default")


def record(number: int, config: TrainConfig, **result: Any) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=1.0, config=config,
                       result=TrialResult(status=Status.OK, throughput=1.0, **result))


def values(name: str) -> tuple[Any, ...]:
    return {"compile": ("none", "default", "reduce-overhead")}.get(name, (None,))


def test_a_compile_of_no_graph_holds_compile_and_refuses_the_other_modes() -> None:
    ran = [record(0, EAGER), record(1, COMPILED, compiled_graphs=0)]
    assert nothing_held(ran) == {"compile": "none"}
    assert held(ran, values)["compile"] == "none"
    graphs = EAGER.replace(compile="reduce-overhead")
    reason = nothing_refused(graphs, ran)
    assert reason is not None and reason.startswith("not run: compile=reduce-overhead")
    assert "trial 1's compile=default compiled no graph" in reason
    assert refused(graphs, ran, "cpu") == reason
    assert nothing_refused(EAGER, ran) is None
    # The loss compiled whole is another scope: its loss may compile.
    assert nothing_refused(COMPILED.replace(compile_scope="loss"), ran) is None


def test_a_compile_that_compiled_graphs_holds_nothing() -> None:
    ran = [record(0, EAGER), record(1, COMPILED, compiled_graphs=3)]
    assert nothing_held(ran) == {} and nothing_refused(COMPILED, ran) is None
    # Unknown (an older result, or counters this torch does not have): nothing either.
    assert nothing_held([record(1, COMPILED)]) == {}


def test_an_adapter_knob_may_choose_a_model_that_compiles() -> None:
    gru, mlp = EAGER.replace(params={"net": "gru"}), EAGER.replace(params={"net": "mlp"})
    ran = [record(0, gru), record(1, gru.replace(compile="default"), compiled_graphs=0)]
    assert nothing_held(ran) == {}
    assert nothing_refused(gru.replace(compile="reduce-overhead"), ran) is not None
    assert nothing_refused(mlp.replace(compile="default"), ran) is None
