"""A tiny adapter that reports, from inside each trial process, where it runs: for the tests of
trials side by side (`--gpus`, emulated on a CPU).

Each trial process writes `$AUTOTUNE_TEST_SLOT_DIR/trial-<pid>.json` with its
`CUDA_VISIBLE_DEVICES`, its CPU affinity and the wall-clock times of its first and latest step;
each DataLoader worker writes `worker-<pid>.json` with its own when it reads its first sample.
With `$AUTOTUNE_TEST_HANG` set, every step hangs (recording "step-<pid>" in
`$AUTOTUNE_TEST_PID_DIR`, see base.py) until the trial is killed. With
`$AUTOTUNE_TEST_CRASH_GPU` set, the first trial on that GPU dies by SIGSEGV in its first step (a
marker file in the slot folder makes it the first only): a crash in one slot.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import Samples, SmallAdapter, record_pid  # noqa: E402

SLOT_DIR_ENV = "AUTOTUNE_TEST_SLOT_DIR"
CRASH_ENV = "AUTOTUNE_TEST_CRASH_GPU"
HANG_ENV = "AUTOTUNE_TEST_HANG"


def _where() -> dict[str, Any]:
    return {"pid": os.getpid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cpus": sorted(os.sched_getaffinity(0))}


def _write(name: str, data: dict[str, Any]) -> None:
    folder = os.environ.get(SLOT_DIR_ENV)
    if folder:
        path = Path(folder) / name
        path.with_suffix(".tmp").write_text(json.dumps(data))
        path.with_suffix(".tmp").replace(path)


class ProbeSamples(Samples):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        info = torch.utils.data.get_worker_info()
        if info is not None and not getattr(self, "_reported", False):
            self._reported = True  # this worker's copy of the dataset
            _write(f"worker-{os.getpid()}.json", _where())
        return super().__getitem__(i)


class SlotProbeAdapter(SmallAdapter):
    samples = 256

    def dataset(self) -> torch.utils.data.Dataset:
        return ProbeSamples(self.samples, self.features, self.classes)

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        self._trial = {**_where(), "first": time.time(), "last": time.time()}
        return super().optimizer(model)

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        crash_gpu = os.environ.get(CRASH_ENV)
        folder = os.environ.get(SLOT_DIR_ENV)
        if crash_gpu and folder and crash_gpu == os.environ.get("CUDA_VISIBLE_DEVICES"):
            marker = Path(folder) / f"crashed-{crash_gpu}"
            if not marker.exists():  # the first step of the first trial on that GPU
                marker.touch()
                _write(f"trial-{os.getpid()}.json", {**self._trial, "crashed": True})
                os.kill(os.getpid(), signal.SIGSEGV)
        trial = getattr(self, "_trial", None)
        if trial is not None and time.time() - trial["last"] > 0.05:
            trial["last"] = time.time()
            _write(f"trial-{os.getpid()}.json", trial)
        if os.environ.get(HANG_ENV):
            record_pid("step")
            time.sleep(3600)
        return super().loss(model, batch)
