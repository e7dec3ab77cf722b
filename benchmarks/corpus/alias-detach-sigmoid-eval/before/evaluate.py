import torch
from torch import nn


@torch.no_grad()
def evaluate(model: nn.Module, loader):
    model.eval()
    all_scores, all_preds = [], []
    for x, _ in loader:
        logits = model(x)
        preds = logits > 0
        all_preds.append(preds)
    return torch.cat(all_preds)
