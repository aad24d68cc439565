import sys, time
import torch
from autotune import load_adapter
a = load_adapter(sys.argv[1])()
ds = a.dataset()
loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, **a.loader_args())
m = a.model().cuda()
opt = a.optimizer(m)
it = iter(loader)
for i in range(4):
    images, targets = next(it)
    batch = (tuple(x.cuda() for x in images), tuple({k: v.cuda() for k, v in t.items()} for t in targets))
    t0 = time.perf_counter()
    loss = a.loss(m, batch)
    loss.backward(); opt.step(); opt.zero_grad()
    torch.cuda.synchronize()
    print("step", i, float(loss), f"{time.perf_counter() - t0:.3f}s", flush=True)
