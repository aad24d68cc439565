"""A compile that failed inside torch.compile's own code: once a trial shows it, the same graph
is compiled in no other mode.

A held-out speech model on an H200 (2026-11-28) failed its tf32 compile=default trial with
"InductorError: AssertionError: (raised in torch.compile's own code:
torch/_inductor/tiling_utils.py:271 in get_pw_red_splits)", and the search went on compiling
the same graph in the other modes, each failing alike after about 66 s of compiling, a large
part of its 540-s budget. A mode only sets options (`torch._inductor.list_mode_options`:
`triton.cudagraphs` for reduce-overhead; `max_autotune` and `coordinate_descent_tuning` for the
max-autotune modes, with CUDA graphs for max-autotune): Dynamo traces, AOTAutograd and Inductor
lower the same graph in each. The same graph: the same config but its compile mode and its
loader-only knobs (`eager.LOADER_ONLY`), the adapter's knobs included. A failure in code that
only some modes reach (`MODE_SPECIFIC`) rules out its own mode alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.in_compiler import compiler_file
from autotune.contract.result import Status
from autotune.study.policy.eager import LOADER_ONLY
from autotune.study.store.records import TrialRecord

__all__ = ["MODE_SPECIFIC", "compiler_failed", "compiler_refused", "failed_in", "mode_specific"]

MODE_SPECIFIC = (
    "cudagraph",  # cudagraph_trees.py, cudagraph_utils.py: CUDA graphs (`triton.cudagraphs`)
    # `max_autotune`: GEMM and conv templates (Triton, C++, CUTLASS, CK, CuTe DSL) and the
    # benchmarking that picks among them (select_algorithm.py, autotune_process.py), the
    # mm/bmm/conv lowerings that offer them; `coordinate_descent_tuning`
    "autotun", "select_algorithm", "template", "cutlass", "cutedsl", "nv_universal_gemm",
    "/rocm/", "kernel/mm", "kernel/bmm", "kernel/conv", "coordinate_descent",
)
"""Parts of a file's path (as "torch/_inductor/...") in torch.compile's own code that only
some compile modes reach: a failure there may not be another mode's. Where in doubt a file is
listed: it then costs a compile, where a wrong refusal would cost a mode that works."""


def failed_in(record: TrialRecord) -> str | None:
    """The file of torch.compile's own code where `record`'s compile failed (an error of a
    trial that ran, noted by `contract.in_compiler`); None for any other outcome. An eager
    trial's is None too: FX and functorch (torch.func) run eagerly as well."""
    if record.status is not Status.ERROR or record.result is None or not record.result.ran \
            or record.config is None or record.config.compile == "none":
        return None
    return compiler_file(record.result.reason)


def compiler_failed(config: TrainConfig, finished: Sequence[TrialRecord]) -> TrialRecord | None:
    """The first trial whose compile of `config`'s graph failed in torch.compile's own code:
    in any compile mode, or in `config`'s when the file is `MODE_SPECIFIC`. None when
    `config` compiles nothing, or no such trial ran."""
    if config.compile == "none":
        return None
    want = _graph(config)
    for record in finished:
        file = failed_in(record)
        if file is None or record.config is None or record.duplicate_of is not None:
            continue
        if _graph(record.config) == want and (record.config.compile == config.compile
                                              or not mode_specific(file)):
            return record
    return None


def compiler_refused(config: TrainConfig, finished: Sequence[TrialRecord]) -> str | None:
    """Why `config` is not run ("not run: ..."): its graph failed to compile in trial N."""
    failed = compiler_failed(config, finished)
    if failed is None or failed.result is None or failed.config is None:
        return None
    why = (f"not run: compiling this step failed inside torch.compile in trial {failed.number} "
           f"({failed.result.reason}), and ")
    file = failed_in(failed) or ""
    if mode_specific(file):
        return why + (f"compile={config.compile} lowers the same graph the same way ({file} "
                      "is reached in some compile modes only: the others may still run)")
    return why + "every compile mode lowers the same graph"


def mode_specific(file: str) -> bool:
    """Whether `file` of torch.compile's own code is reached in some compile modes only."""
    return any(part in file for part in MODE_SPECIFIC)


def _graph(config: TrainConfig) -> dict[str, Any]:
    """What a compile lowers, whatever its mode: the config but its mode and loader-only knobs."""
    return {k: v for k, v in config.to_dict().items() if k not in LOADER_ONLY and k != "compile"}
