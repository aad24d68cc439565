"""A tiny adapter whose step hangs (sleeps an hour in `loss`) only when the bottleneck
diagnosis runs it, after the timed windows: a diagnosis longer than the trial's limit, which
must not cost the trial its measurement. Each trial process records its pid in
`$AUTOTUNE_TEST_PID_DIR` (see ../base.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

DIAGNOSIS = "autotune.trial.diagnose"


def _diagnosing() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == DIAGNOSIS:
            return True
        frame = frame.f_back
    return False


class HangDiagnosisAdapter(SmallAdapter):
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if _diagnosing():
            time.sleep(3600)
        return super().loss(model, batch)
