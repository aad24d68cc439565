"""The GPU's achievable bf16 matrix rate, measured: the denominator of MFU."""

from __future__ import annotations

__all__ = ["bf16_matmul_flops"]


def bf16_matmul_flops(n: int = 8192, iters: int = 20, device: str = "cuda") -> float:
    """FLOP/s of an n x n x n bf16 matrix product on random data (2 n^3 FLOPs each), timed with
    CUDA events after warm-up. Random data, never zeros: zeros run faster than real inputs."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        a @ b
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    del a, b
    torch.cuda.empty_cache()
    return 2 * n**3 * iters / seconds
