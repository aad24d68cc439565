"""A plain training loop, no autotune measurement code in it: the reference for fidelity.

    python benchmarks/measurement/long_run.py --adapter adapters/gpt.py --config best.yaml \\
        --seconds 180

Builds the step the way a user applies best.yaml (DataLoader kwargs, wrap_model, autocast,
GradScaler, `grad_accum` micro-batches per optimizer step), trains for `--warmup` seconds (compile
and loader start-up), then counts items for `--seconds` between two synchronizations and prints
one JSON line. Run it under `autotune apply` so the allocator environment is set too.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import autotune


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adapter", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=float, default=30.0, help="seconds before counting")
    p.add_argument("--seconds", type=float, default=180.0, help="seconds counted")
    args = p.parse_args()

    cfg = autotune.load_config(args.config)
    adapter = autotune.load_adapter(args.adapter)()
    device = torch.device(args.device)
    model = adapter.model()
    blocks = adapter.blocks(model)
    model = model.to(device)
    optimizer = adapter.optimizer(model)
    train_model = cfg.wrap_model(model, blocks)
    scaler = cfg.grad_scaler(device.type)
    loader = torch.utils.data.DataLoader(adapter.dataset(), shuffle=True, drop_last=True,
                                         **cfg.dataloader_kwargs())
    non_blocking = cfg.pin_memory

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
    while True:
        for _ in range(cfg.grad_accum):
            batch = next(it)
            n = adapter.items(batch)
            batch = [t.to(device, non_blocking=non_blocking) for t in batch]
            with cfg.autocast(device.type):
                loss = adapter.loss(train_model, batch) / cfg.grad_accum
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
        elif counting and now - t0 >= args.seconds:
            break
    sync()
    elapsed = time.perf_counter() - t0
    print(json.dumps({"throughput": items / elapsed, "items": items, "steps": steps,
                      "seconds": elapsed, "final_loss": float(loss) * cfg.grad_accum}))


if __name__ == "__main__":
    main()
