"""A tiny adapter whose step kills its own process with SIGSEGV above batch size 8.

What a crash in native code (a CUDA driver fault, a bad extension) looks like from outside: the
process dies by a signal and writes no result. Batch 8 (the baseline) trains normally, so a
search over batch sizes has good trials too. Each trial process records its pid in
`$AUTOTUNE_TEST_PID_DIR` (see ../base.py), so a test can check it is gone.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

THRESHOLD = 8


class SegfaultAdapter(SmallAdapter):
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if len(batch[0]) > THRESHOLD:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().loss(model, batch)
