import numpy as np
import torch


def peak_normalize(wave: np.ndarray) -> torch.Tensor:
    x = torch.as_tensor(wave, dtype=torch.float32)
    x /= x.abs().max().clamp_min(1e-8)
    return x


def load_pair(wave: np.ndarray):
    model_input = peak_normalize(wave)
    raw_copy = wave.copy()
    return model_input, raw_copy
