"""A plain training loop, no autotune measurement code in it: the reference for fidelity.

    python benchmarks/measurement/long_run.py --adapter adapters/gpt.py --config best.yaml \\
        --seconds 180

Builds the step the way a user applies best.yaml (docs/outputs.md: DataLoader kwargs, the
optimizer rebuilt as measured, wrap_model, wrap_loss, the attention-kernel context, autocast,
GradScaler, to_device, `grad_accum` micro-batches per optimizer step), trains for `--warmup` seconds (compile
and loader start-up), then counts items for `--seconds` between two synchronizations and prints
one JSON line. Run it under `autotune apply` so the allocator environment is set too.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from typing import Any

import torch

import autotune
from autotune.adapter import defines


def user_loader(adapter: autotune.Adapter, dataset: Any, knobs: dict[str, Any]) -> Iterable[Any]:
    """The loader a user's loop builds with best.yaml's knobs: the adapter's own `make_loader`,
    or a DataLoader with its `loader_args` (collate, sampler), shuffled and dropping the last
    partial batch unless those say otherwise; an IterableDataset is never shuffled (PyTorch
    refuses, and it orders itself)."""
    if defines(type(adapter), "make_loader"):  # all five knobs, as the tool gives them
        return adapter.make_loader(dataset, **{"prefetch_factor": None,
                                               "persistent_workers": False, **knobs})
    args = dict(adapter.loader_args())
    args.setdefault("drop_last", True)
    if not isinstance(dataset, torch.utils.data.IterableDataset) \
            and args.get("sampler") is None and args.get("batch_sampler") is None:
        args.pop("sampler", None)
        args.setdefault("shuffle", True)
    return torch.utils.data.DataLoader(dataset, **args, **knobs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=float, default=30.0, help="seconds before counting")
    p.add_argument("--seconds", type=float, default=180.0, help="seconds counted")
    p.add_argument("--slice-seconds", type=float, default=10.0,
                   help="also report the rate of each slice this long (a drift within the run)")
    args = p.parse_args()

    cfg = autotune.load_config(args.config)
    adapter = autotune.load_adapter(args.adapter)()
    device = torch.device(args.device)
    model = adapter.model()
    blocks = adapter.blocks(model)
    model = model.to(device)
    optimizer = cfg.optimizer(adapter.optimizer(model))
    train_model = cfg.wrap_model(model, blocks)
    # With compile_scope: loss the model comes back eager and the loss compiles with it: a
    # loop that left this out ran GPT-2's winner eager, 367k tokens/s against 482k measured.
    step_loss = cfg.wrap_loss(adapter.loss)
    scaler = cfg.grad_scaler(device.type)
    loader = user_loader(adapter, adapter.dataset(), cfg.dataloader_kwargs())

    def batches():
        while True:  # epochs
            yield from loader

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    it = batches()
    start = time.perf_counter()
    counting = False
    items = steps = 0
    t0 = 0.0
    slices: list[float] = []  # rate of each --slice-seconds slice, synchronized at its ends
    slice_start, slice_items = 0.0, 0
    while True:
        for _ in range(cfg.grad_accum):
            batch = next(it)
            n = adapter.items(batch)
            batch = cfg.to_device(batch, device)
            with cfg.sdpa_kernel():  # around forward and backward, as the trials run it
                with cfg.autocast(device.type):
                    loss = step_loss(train_model, batch) / cfg.grad_accum
                scaler.scale(loss).backward()
            if counting:
                items += n
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        steps += counting
        now = time.perf_counter()
        if not counting and now - start >= args.warmup:
            sync()
            counting, t0 = True, time.perf_counter()
            slice_start = t0
            continue
        # A slice closes before the run ends: a run's last step ends its last slice too (a
        # step longer than --seconds, on a loaded host, left no slice at all).
        if counting and now - slice_start >= args.slice_seconds:
            sync()
            now = time.perf_counter()
            slices.append((items - slice_items) / (now - slice_start))
            slice_start, slice_items = now, items
        if counting and now - t0 >= args.seconds:
            break
    sync()
    elapsed = time.perf_counter() - t0
    print(json.dumps({"throughput": items / elapsed, "items": items, "steps": steps,
                      "seconds": elapsed, "slices": slices,
                      "final_loss": float(loss.detach()) * cfg.grad_accum}))


if __name__ == "__main__":
    main()
