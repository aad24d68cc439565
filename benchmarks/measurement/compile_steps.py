"""Step by step, what a compiled (or eager) train step of an adapter costs: each step's seconds,
its batch's shapes, and Dynamo's graph count and compile seconds after it. For a search trial
killed "still warming up" with a compile, this shows which steps compiled and for how long
(run it with TORCH_LOGS=recompiles,graph_breaks for Dynamo's reasons).

    python benchmarks/measurement/compile_steps.py --adapter adapters/hf_bert.py \
        --compile default --dynamic --dtype bf16 --steps 12 [--mark]

Prints one line per step (steps after --every are summarized every --every steps), then the
median step of batches whose shapes were new against those seen before, with the caching
allocator's device allocations (cudaMalloc) made in each kind: what a first-seen shape costs an
eager step.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from autotune.adapter import load_adapter
from autotune.trial.compose import PEEK_BATCHES
from autotune.trial.features.compile import compile_seconds, dims_to_mark, mark_varying
from autotune.trial.shapes import signature
from autotune.trial.features.sdpa import apply_sdpa

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def shapes(batch: object) -> str:
    if isinstance(batch, torch.Tensor):
        return "x".join(map(str, batch.shape))
    if isinstance(batch, dict):
        return " ".join(f"{k}:{shapes(v)}" for k, v in batch.items() if isinstance(v, torch.Tensor))
    if isinstance(batch, (list, tuple)):
        return " ".join(shapes(v) for v in batch)
    return type(batch).__name__


def to(batch: object, device: torch.device) -> object:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to(v, device) for v in batch)
    return batch


def device_allocs() -> int:
    """cudaMalloc calls the caching allocator has made (0 off CUDA)."""
    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.memory_stats().get("num_device_alloc", 0))


def summary(times: list[float], new: list[bool], allocs: list[int]) -> str:
    """Median step of first-seen shapes against repeated ones, and the allocations of each."""
    out = []
    for label, want in (("new shape", True), ("seen shape", False)):
        ts = [t for t, n in zip(times, new) if n == want]
        made = sum(a for a, n in zip(allocs, new) if n == want)
        if ts:
            out.append(f"{label}: {len(ts)} steps, median {statistics.median(ts):.4f} s, "
                       f"{made} device allocations")
    return "; ".join(out)


def graphs() -> int:
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--compile", default="none", help="none, default, reduce-overhead, ...")
    p.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32", "tf32"])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=25, help="one line per step up to here")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--sdpa", default="default", help="sdpa_backend: default, flash, efficient, "
                   "cudnn, math")
    p.add_argument("--mark", action="store_true", help="mark the dimensions that vary among "
                   "the first batches dynamic, as a search trial does (`compose.start_loader`)")
    args = p.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    adapter = load_adapter(args.adapter)()
    loader = torch.utils.data.DataLoader(
        adapter.dataset(), batch_size=adapter.batch_size, num_workers=args.workers,
        pin_memory=device.type == "cuda", persistent_workers=args.workers > 0,
        **adapter.loader_args())
    model = adapter.model().to(device)
    opt = adapter.optimizer(model)
    run = model if args.compile == "none" else torch.compile(
        model, mode=None if args.compile == "default" else args.compile,
        dynamic=True if args.dynamic else None)
    amp = (torch.autocast(device.type, DTYPES[args.dtype]) if args.dtype in DTYPES
           else contextlib.nullcontext())
    print(f"{args.adapter} compile={args.compile} dynamic={args.dynamic} dtype={args.dtype} "
          f"sdpa={args.sdpa} device={device} torch {torch.__version__}", flush=True)
    if device.type == "cuda":
        print(f"SDPA priority: {torch._C._get_sdp_priority_order()}", flush=True)
    times: list[float] = []
    items: list[float] = []
    new: list[bool] = []  # whether each step's batch shapes were first seen there
    allocs: list[int] = []  # cudaMalloc calls during each step
    seen: set[str] = set()
    start = time.perf_counter()
    batches = iter(loader)
    dims: frozenset[tuple[str, int]] = frozenset()
    if args.mark:
        peeked = [next(batches) for _ in range(PEEK_BATCHES)]
        dims = dims_to_mark([signature(b) for b in peeked])
        print(f"marked dynamic: {sorted(dims) or 'nothing (the peeked batches repeat a shape)'}",
              flush=True)
        batches = iter(loader)
    for n in range(args.steps):
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(loader)
            batch = next(batches)
        before = device_allocs()
        t0 = time.perf_counter()
        with apply_sdpa(args.sdpa):
            with amp:
                loss = adapter.loss(run, mark_varying(to(batch, device), dims))
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        items.append(float(adapter.items(batch)))
        allocs.append(device_allocs() - before)
        new.append(shapes(batch) not in seen)
        seen.add(shapes(batch))
        if n < args.every:
            print(f"step {n:4d} {times[-1]:8.3f} s  graphs {graphs()}  compile "
                  f"{compile_seconds() or 0:6.1f} s  {'new ' if new[-1] else 'seen'} "
                  f"allocs {allocs[-1]:3d}  {shapes(batch)}", flush=True)
        elif (n + 1) % args.every == 0:
            last = slice(-args.every, None)
            print(f"steps {n + 1 - args.every}-{n}: median {statistics.median(times[last]):.4f} s, "
                  f"{sum(items[last]) / sum(times[last]):.4g} items/s, graphs {graphs()}",
                  flush=True)
    print(f"total {time.perf_counter() - start:.1f} s; {len(seen)} distinct shapes", flush=True)
    print(f"SHAPES {args.adapter} dtype={args.dtype} compile={args.compile} "
          f"{summary(times, new, allocs)}", flush=True)


if __name__ == "__main__":
    main()
