"""What glibc's heap trimming does to an eager CPU step, and why a forked trial read it faster.

    python benchmarks/measurement/host_malloc.py [--adapter adapters/mlp.py] [--steps 400] \\
        [--repeats 2]

Each case is a fresh Python process timing the adapter's eager train step (its loader, model,
optimizer, loss; bf16 autocast and fp32) at the adapter's batch size, after 50 warm-up steps:
- plain: nothing else;
- inductor imported: `import torch._inductor.compile_fx` first, as the fork server does (and
  every process that compiles);
- malloc thresholds: plain, with `MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` set
  (glibc mallopt(3) tunables), so freed memory stays in the heap instead of going back to the
  kernel and faulting in again.
Cases alternate, `--repeats` times each; the median rate per case is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "plain": ("", {}),
    "inductor imported": ("import torch._inductor.compile_fx", {}),
    "malloc thresholds": ("", {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                               "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}),
}

STEP = """
import sys, time, torch
sys.path.insert(0, {root!r})
{pre}
from autotune.adapter import load_adapter
cls = load_adapter({adapter!r}); a = cls(); model = a.model(); opt = a.optimizer(model)
loader = torch.utils.data.DataLoader(a.dataset(), batch_size=cls.batch_size)
batches = iter(loader)
def step():
    global batches
    try:
        batch = next(batches)
    except StopIteration:
        batches = iter(loader); batch = next(batches)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled={bf16}):
        loss = a.loss(model, batch)
    loss.backward(); opt.step(); opt.zero_grad()
for _ in range(50):
    step()
t = time.perf_counter()
for _ in range({steps}):
    step()
print(cls.batch_size * {steps} / (time.perf_counter() - t))
"""


def rate(adapter: str, pre: str, env: dict[str, str], bf16: bool, steps: int) -> float:
    code = STEP.format(root=str(ROOT), pre=pre, adapter=adapter, bf16=bf16, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", default="adapters/mlp.py")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    import torch

    print(f"{args.adapter}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"{torch.get_num_threads()} threads")
    for bf16 in (True, False):
        rates: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.repeats):
            for name, (pre, env) in CASES.items():
                rates[name].append(rate(args.adapter, pre, env, bf16, args.steps))
        plain = statistics.median(rates["plain"])
        for name, values in rates.items():
            median = statistics.median(values)
            print(f"{'bf16' if bf16 else 'fp32'}  {name:18s} {median:8.0f} items/s "
                  f"({', '.join(f'{v:.0f}' for v in values)})  {median / plain:.2f}x plain")
    return 0


if __name__ == "__main__":
    sys.exit(main())
