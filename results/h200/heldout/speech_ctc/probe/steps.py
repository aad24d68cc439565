"""Per-step times of the speech adapter's eager step, bf16 or fp32, each batch a new padded
length: which knob makes the first steps slow. `python steps.py DTYPE [sdpa]` where sdpa is
default | no-cudnn | efficient | math | no-cudnn-conv; PYTORCH_CUDA_ALLOC_CONF as the caller sets it."""

import os
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
from adapters.speech_ctc import SpeechAdapter  # noqa: E402

dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[sys.argv[1]]
sdpa = sys.argv[2] if len(sys.argv) > 2 else "default"
if sdpa == "no-cudnn":
    torch.backends.cuda.enable_cudnn_sdp(False)
elif sdpa == "efficient":
    torch.backends.cuda.enable_cudnn_sdp(False); torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
elif sdpa == "no-cudnn-conv":
    torch.backends.cudnn.enabled = False
elif sdpa == "math":
    torch.backends.cuda.enable_cudnn_sdp(False); torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
a = SpeechAdapter()
model = a.model().cuda()
opt = a.optimizer(model)
loader = torch.utils.data.DataLoader(a.dataset(), batch_size=32, num_workers=12, shuffle=True,
                                     pin_memory=True, prefetch_factor=4, **a.loader_args())
times, seen = [], set()
for i, batch in enumerate(loader):
    if i == 30:
        break
    batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
        loss = a.loss(model, batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    length = batch["feats"].shape[1]
    times.append((time.perf_counter() - t, length, length in seen))
    seen.add(length)
first = " ".join(f"{s*1000:.0f}" for s, _, _ in times[:12])
late = sorted(s for s, _, _ in times[20:])
print(f"{sys.argv[1]:5} sdpa={sdpa:9} alloc={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '-'):28} "
      f"first 12 steps ms: {first} | steps 20-30 median {late[len(late)//2]*1000:.0f} ms, "
      f"max {late[-1]*1000:.0f}; {len(seen)} lengths")
