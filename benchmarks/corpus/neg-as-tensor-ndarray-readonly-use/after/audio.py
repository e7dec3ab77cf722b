import numpy as np
import torch


def rms(wave: np.ndarray) -> float:
    x = torch.as_tensor(wave)
    return x.pow(2).mean().sqrt().item()


def peak_normalize(wave: np.ndarray) -> torch.Tensor:
    x = torch.as_tensor(wave, dtype=torch.float32)
    return x / x.abs().max().clamp_min(1e-8)
