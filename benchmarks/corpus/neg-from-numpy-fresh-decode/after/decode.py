import numpy as np
import torch


def decode(raw: bytes, shape):
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(shape).astype(np.float32)
    img = torch.from_numpy(arr)
    img.div_(255.0)
    return img
