import numpy as np
import torch


def rms(wave: np.ndarray) -> float:
    return float(np.sqrt(np.mean(wave ** 2)))
