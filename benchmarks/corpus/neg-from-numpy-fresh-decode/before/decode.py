import numpy as np
import torch


def decode(raw: bytes, shape):
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(shape)
    return torch.tensor(arr, dtype=torch.float32) / 255.0
