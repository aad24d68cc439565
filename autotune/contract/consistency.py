"""Whether a trial's part rates (the loader alone, the model alone) can be true beside its
end-to-end rate: the diagnosis sets aside a rate that cannot (`trial.diagnose`), and the search
does not act on one (`study.policy.headroom.loader_alone`, which the sampler and the ladder
read)."""

from __future__ import annotations

__all__ = ["CONSISTENT", "contradicted"]

# A part's rate this far below the end-to-end rate contradicts it beyond noise (the search's
# windows agree to 5%; a short probe reads a little lower or higher, not 20% lower).
CONSISTENT = 0.8


def contradicted(*, throughput: float, loader_rate: float | None,
                 compute_rate: float | None) -> tuple[bool, bool]:
    """Whether the loader's and the model's rates contradict the end-to-end rate:
    (loader, model). The model with data resident does less than the whole step, so it cannot
    be slower; the loader made every batch the step took, waits or not, so neither can it (a
    held-out timm ViT's loader probe read 243 images/s beside 1.6k end to end, waiting 34%,
    and its search then held every compile back as input-bound; H100, 2026-11-27)."""
    loader = loader_rate is not None and loader_rate < CONSISTENT * throughput
    model = compute_rate is not None and compute_rate < CONSISTENT * throughput
    return loader, model
