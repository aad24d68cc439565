"""A compile that compiled nothing: once a trial shows it, no other compile mode is paid for.

Dynamo skips some models whole: `nn.GRU`, `nn.LSTM` and `nn.RNN` unless
`torch._dynamo.config.allow_rnn`, a frame it cannot trace. The compiled trial then runs the
model eagerly, and reads what eager reads. A GRU tagger on a 2-CPU VM (2026-11-28) was shown
"compile=default" with a 0.1-s compile, and the search went on proposing compile modes that
each measured eager again. Every compiled trial reports the graphs its first step compiled
(`TrialResult.compiled_graphs`); from a compile of none on, the sampler holds `compile` at
"none", and a compiled config of the same scope and adapter knob values is not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.study.store.records import TrialRecord

__all__ = ["compiled_nothing", "nothing_held", "nothing_refused"]


def compiled_nothing(records: Sequence[TrialRecord], *, scope: str | None = None,
                     params: Any = None) -> TrialRecord | None:
    """The first ok trial whose compile compiled no graph (of compile scope `scope`, and with
    the adapter knob values `params`, when given), else None."""
    return next((r for r in records if r.ok and r.result is not None and r.config is not None
                 and r.config.compile != "none" and r.result.compiled_graphs == 0
                 and (scope is None or r.config.compile_scope == scope)
                 and (params is None or r.config.params == params)), None)


def nothing_held(records: Sequence[TrialRecord]) -> dict[str, Any]:
    """{"compile": "none"} once a compile compiled nothing: not for an adapter with knobs (one
    may choose another model), nor when some compile did compile a graph."""
    if compiled_nothing(records) is None:
        return {}
    if any(r.config is not None and r.config.params for r in records):
        return {}
    if any(r.result is not None and (r.result.compiled_graphs or 0) > 0 for r in records):
        return {}
    return {"compile": "none"}


def nothing_refused(config: TrainConfig, records: Sequence[TrialRecord]) -> str | None:
    """Why compiled `config` is not run: a trial of its scope and knob values compiled nothing."""
    if config.compile == "none":
        return None
    empty = compiled_nothing(records, scope=config.compile_scope, params=config.params)
    if empty is None or empty.config is None:
        return None
    return (f"not run: compile={config.compile} would run the model eagerly: trial "
            f"{empty.number}'s compile={empty.config.compile} compiled no graph (Dynamo skips "
            "a model it cannot trace, such as nn.GRU or nn.LSTM without "
            "torch._dynamo.config.allow_rnn)")
