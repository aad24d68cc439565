"""Held-out probe: input-bound, a token-budget batch sampler (batch size varies inversely with length),
per-sample Python tokenization work in workers, make_loader building its own DataLoader."""
import torch, random
import autotune

class Texts(torch.utils.data.Dataset):
    def __init__(self): self.n = 20000
    def __len__(self): return self.n
    def __getitem__(self, i):
        rng = random.Random(i); L = rng.randint(16, 256)
        # "tokenize": python work per token
        ids = [hash((i, k)) % 5000 for k in range(L)]
        s = 0
        for _ in range(20):
            s = sum(ids) % 7
        return torch.tensor(ids), L

class TokenBudget(torch.utils.data.Sampler):
    def __init__(self, n, budget): self.n, self.budget = n, budget
    def __iter__(self):
        rng = random.Random(0); idx = list(range(self.n)); rng.shuffle(idx)
        batch, longest = [], 0
        for i in idx:
            L = random.Random(i).randint(16, 256)
            if batch and max(longest, L) * (len(batch) + 1) > self.budget:
                yield batch; batch, longest = [], 0
            batch.append(i); longest = max(longest, L)
        if batch: yield batch
    def __len__(self): return self.n // 16

def collate(samples):
    L = max(s[1] for s in samples)
    x = torch.zeros(len(samples), L, dtype=torch.long)
    for r, (ids, n) in enumerate(samples): x[r, :n] = ids
    return {"tokens": x, "lengths": torch.tensor([s[1] for s in samples])}

class TokBudgetAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = 4096  # token budget
    def dataset(self): return Texts()
    def make_loader(self, dataset, *, batch_size, num_workers, prefetch_factor, pin_memory, persistent_workers):
        return torch.utils.data.DataLoader(dataset, batch_sampler=TokenBudget(len(dataset), batch_size),
            collate_fn=collate, num_workers=num_workers, prefetch_factor=prefetch_factor,
            pin_memory=pin_memory, persistent_workers=persistent_workers)
    def model(self):
        return torch.nn.Sequential(torch.nn.Embedding(5000, 64), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5000))
    def optimizer(self, model): return torch.optim.AdamW(model.parameters(), lr=1e-3)
    def loss(self, model, batch):
        logits = model(batch["tokens"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["tokens"].flatten())
    def items(self, batch): return int(batch["lengths"].sum())
