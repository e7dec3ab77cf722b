import numpy as np
import torch


def to_numpy(t):
    return np.asarray(t.tolist())
