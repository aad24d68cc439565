"""Seconds of NumPy augmentation an image in adapters/augment.py, one process (AUGMENT_* as set)."""
import importlib.util, os, sys, time
import torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("a", "adapters/augment.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
d = m.AugmentedImages()
for i in range(30): d[i]
t = time.perf_counter()
for i in range(300): d[i % len(d)]
print("PROBE", os.environ.get("AUGMENT_CROP"), "blas threads", os.environ.get("OPENBLAS_NUM_THREADS", "default"),
      round((time.perf_counter() - t) / 300 * 1e6), "us/image")
