import numpy as np
import torch


def batches(array, batch_size):
    for i in range(0, len(array), batch_size):
        yield torch.from_numpy(array[i:i + batch_size])
