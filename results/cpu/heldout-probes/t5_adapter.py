"""Held-out probe: a transformers T5 (seq2seq) from its config, source and target lengths varying,
padded per batch by transformers' own DataCollatorForSeq2Seq-like collate (BatchEncoding), labels -100."""
import torch
from transformers import BatchEncoding, T5Config, T5ForConditionalGeneration
import autotune

class Pairs(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.src = [torch.randint(5, 4000, (int(n),), generator=g).tolist()
                    for n in torch.randint(8, 96, (2048,), generator=g)]
        self.tgt = [torch.randint(5, 4000, (int(n),), generator=g).tolist()
                    for n in torch.randint(4, 48, (2048,), generator=g)]
    def __len__(self): return len(self.src)
    def __getitem__(self, i): return {"input_ids": self.src[i], "labels": self.tgt[i]}

def collate(samples):
    ls = max(len(s["input_ids"]) for s in samples); lt = max(len(s["labels"]) for s in samples)
    ids = torch.zeros(len(samples), ls, dtype=torch.long); mask = torch.zeros_like(ids)
    lab = torch.full((len(samples), lt), -100, dtype=torch.long)
    for r, s in enumerate(samples):
        ids[r, :len(s["input_ids"])] = torch.tensor(s["input_ids"]); mask[r, :len(s["input_ids"])] = 1
        lab[r, :len(s["labels"])] = torch.tensor(s["labels"])
    return BatchEncoding({"input_ids": ids, "attention_mask": mask, "labels": lab})

class T5Adapter(autotune.Adapter):
    unit = "tokens"
    batch_size = 16
    def dataset(self): return Pairs()
    def loader_args(self): return {"collate_fn": collate}
    def model(self):
        cfg = T5Config(vocab_size=4096, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4,
                       decoder_start_token_id=0, pad_token_id=0)
        return T5ForConditionalGeneration(cfg)
    def optimizer(self, model): return torch.optim.AdamW(model.parameters(), lr=1e-4)
    def loss(self, model, batch): return model(**batch).loss
    def items(self, batch): return int((batch["labels"] != -100).sum() + batch["attention_mask"].sum())
