"""An adapter file that raises while it is imported: the search must refuse it before any trial."""

from __future__ import annotations

import autotune


def _configure() -> None:
    raise RuntimeError("adapter configuration failed: fault injected at import")


_configure()


class NeverDefined(autotune.Adapter):  # not reached
    batch_size = 8
