"""Held-out probe: torch.nn.TransformerEncoder, variable lengths padded per batch with a key padding mask, tuple batches."""
import torch, random
import autotune

class Seqs(torch.utils.data.Dataset):
    def __len__(self): return 4096
    def __getitem__(self, i):
        L = random.Random(i).randint(20, 120)
        return torch.randn(L, 64), i % 5

def collate(samples):
    L = max(x.shape[0] for x, _ in samples)
    x = torch.zeros(len(samples), L, 64); pad = torch.ones(len(samples), L, dtype=torch.bool)
    for r, (s, _) in enumerate(samples): x[r, :len(s)] = s; pad[r, :len(s)] = False
    return x, pad, torch.tensor([y for _, y in samples])

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        self.enc = torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
        self.head = torch.nn.Linear(64, 5)
    def forward(self, x, pad):
        h = self.enc(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))

class NNTAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 32
    def dataset(self): return Seqs()
    def loader_args(self): return {"collate_fn": collate}
    def model(self): return Net()
    def optimizer(self, model): return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    def loss(self, model, batch):
        x, pad, y = batch
        return torch.nn.functional.cross_entropy(model(x, pad), y)
    def blocks(self, model): return list(model.enc.layers)
