import numpy as np
import torch
from torch.utils.data import Dataset


class CachedImages(Dataset):
    def __init__(self, images: np.ndarray, mean: float):
        self.images = images.astype(np.float32)
        self.mean = mean

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = torch.from_numpy(self.images[i])
        img -= self.mean
        return img
