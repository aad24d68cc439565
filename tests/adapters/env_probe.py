"""A tiny adapter that writes, from each trial process, the environment variables a test asks
about: `$AUTOTUNE_TEST_ENV_DIR/env-<rank>.json` (rank "single" outside DDP) with the values of
the names listed in `$AUTOTUNE_TEST_ENV_NAMES` (comma-separated; null when unset)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

ENV_DIR = "AUTOTUNE_TEST_ENV_DIR"
ENV_NAMES = "AUTOTUNE_TEST_ENV_NAMES"


class EnvProbeAdapter(SmallAdapter):
    def model(self) -> nn.Module:
        folder = os.environ.get(ENV_DIR)
        if folder:
            names = [n for n in os.environ.get(ENV_NAMES, "").split(",") if n]
            rank = os.environ.get("RANK", "single")
            (Path(folder) / f"env-{rank}.json").write_text(
                json.dumps({n: os.environ.get(n) for n in names}))
        return super().model()
