import numpy as np
import torch


def validate(model, loader, device):
    model.eval()
    preds = []
    for x, y in loader:
        logits = model(x.to(device))
        preds.append(logits.detach().numpy())
    return np.concatenate(preds)
