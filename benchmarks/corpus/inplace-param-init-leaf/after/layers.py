import math

import torch
from torch import nn


class ScaledLinear(nn.Module):
    def __init__(self, fan_in, fan_out, scale=1.0):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        bound = 1 / math.sqrt(fan_in)
        self.weight.uniform_(-bound, bound)

    def forward(self, x):
        return self.scale * x @ self.weight.t()
