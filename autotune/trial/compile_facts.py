"""What `torch.compile` did in a trial: hits and misses of the study's persistent caches, and the
artifacts production loads to skip the compile. (What Dynamo compiled after the first step is
read by `features.compile.CompileWatch` around the timed step.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.contract.request import TrialRequest

__all__ = ["Compiled", "compiled"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compiled:
    """What `torch.compile` found in the study's persistent caches, and what it saved."""

    cache_hits: int
    cache_misses: int
    artifacts: str = ""
    """Path of the saved compile artifacts ("" when none were asked for or made)."""
    dynamic_shapes: bool = False
    """Whether the model was compiled with dynamic shapes from the start."""


def compiled(request: TrialRequest, folder: Path | None, *, dynamic_shapes: bool) -> Compiled:
    """Hits and misses of the persistent FX-graph and AOTAutograd caches in this process, and
    the compile artifacts saved into `folder` when the request asks (None: nowhere to)."""
    from torch._dynamo.utils import counters

    hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
    misses = (counters["inductor"]["fxgraph_cache_miss"]
              + counters["aot_autograd"]["autograd_cache_miss"])
    saved = _save_compile_artifacts(folder) \
        if request.save_compile_artifacts and folder is not None else ""
    return Compiled(cache_hits=int(hits), cache_misses=int(misses), artifacts=saved,
                    dynamic_shapes=dynamic_shapes)


def _save_compile_artifacts(folder: Path) -> str:
    """`torch.compiler.save_cache_artifacts()` into `folder`: what production loads to skip the
    compile (PyTorch's "Compile Time Caching" recipe). "" when there is nothing to save."""
    import torch

    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return ""
    path = folder / "compile_artifacts.bin"
    path.write_bytes(saved[0])
    return str(path)
