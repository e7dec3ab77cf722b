import torch
from torch.utils.data import Dataset


class Windows(Dataset):
    def __init__(self, series, width):
        self.series, self.width = series, width

    def __len__(self):
        return len(self.series) - self.width

    def __getitem__(self, i):
        return {"x": self.series[i:i + self.width], "y": self.series[i + self.width]}
