import torch
import torch.nn.functional as F


def validate(model, loader):
    model.eval()
    total, n = 0.0, 0
    for x, y in loader:
        loss = F.mse_loss(model(x), y, reduction="sum")
        total += loss.item()
        n += len(x)
    return total / n
