import math

import torch
from torch import nn


class ScaledLinear(nn.Module):
    def __init__(self, fan_in, fan_out, scale=1.0):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.randn(fan_out, fan_in) / math.sqrt(fan_in))

    def forward(self, x):
        return self.scale * x @ self.weight.t()
