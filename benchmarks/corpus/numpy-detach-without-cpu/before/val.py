import numpy as np
import torch


def validate(model, loader, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x.to(device))
            correct += (logits.argmax(1).cpu() == y).sum().item()
    return correct
