import numpy as np
import torch


def binarize(probs: torch.Tensor, thr: float = 0.5) -> np.ndarray:
    return (probs.numpy() >= thr).astype(np.uint8)
