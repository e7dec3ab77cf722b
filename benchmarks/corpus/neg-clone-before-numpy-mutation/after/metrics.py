import numpy as np
import torch


def binarize(probs: torch.Tensor, thr: float = 0.5) -> np.ndarray:
    arr = probs.clone().numpy()
    arr[arr >= thr] = 1.0
    arr[arr < thr] = 0.0
    return arr.astype(np.uint8)
