"""Held-out probe: transformers ViT from its config, uint8 images normalized in the collate, BatchFeature batches."""
import torch
from transformers import BatchFeature, ViTConfig, ViTForImageClassification
import autotune

class Images(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 255, (1024, 3, 64, 64), dtype=torch.uint8, generator=g)
        self.y = torch.randint(0, 10, (1024,), generator=g)
    def __len__(self): return len(self.x)
    def __getitem__(self, i): return self.x[i], self.y[i]

def collate(samples):
    x = torch.stack([s[0] for s in samples]).float().div_(255)
    return BatchFeature({"pixel_values": x, "labels": torch.stack([s[1] for s in samples])})

class ViTAdapter(autotune.Adapter):
    unit = "images"
    batch_size = 32
    def dataset(self): return Images()
    def loader_args(self): return {"collate_fn": collate}
    def model(self):
        return ViTForImageClassification(ViTConfig(image_size=64, patch_size=8, hidden_size=128,
            num_hidden_layers=4, num_attention_heads=4, intermediate_size=256, num_labels=10))
    def optimizer(self, model): return torch.optim.AdamW(model.parameters(), lr=1e-4)
    def loss(self, model, batch): return model(**batch).loss
    def blocks(self, model): return list(model.vit.layers)
