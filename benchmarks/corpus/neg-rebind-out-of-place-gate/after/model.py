import torch
from torch import nn


class GatedBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        self.gate_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        gate = torch.sigmoid(self.gate(x))
        gate = gate + self.gate_bias
        return self.proj(x) * gate
