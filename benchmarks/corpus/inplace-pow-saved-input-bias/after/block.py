import torch
from torch import nn


class EnergyBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.shift = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        h = self.fc(x)
        energy = (h ** 2).sum(-1)
        h += self.shift
        return h, energy
