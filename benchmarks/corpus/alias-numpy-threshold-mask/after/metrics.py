import numpy as np
import torch


def binarize(probs: torch.Tensor, thr: float = 0.5) -> np.ndarray:
    arr = probs.numpy()
    arr[arr >= thr] = 1.0
    arr[arr < thr] = 0.0
    return arr.astype(np.uint8)


@torch.no_grad()
def report(model, x, y):
    probs = torch.sigmoid(model(x)).cpu()
    mask = binarize(probs)
    calib = (probs - y).abs().mean().item()
    return mask, calib
