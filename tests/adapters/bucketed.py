"""The length-specializing step of `specialized.py` on batches padded to one of two bucket
lengths (16 and 32 tokens, in turn): compiled, it needs one graph per bucket, a cost a search
can pay."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters
from specialized import SpecializedAdapter  # noqa: E402


class BucketedAdapter(SpecializedAdapter):
    lengths = (16, 32)
