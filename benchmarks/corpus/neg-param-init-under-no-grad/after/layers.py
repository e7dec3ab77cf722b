import math

import torch
from torch import nn


class ScaledLinear(nn.Module):
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.size(1))
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x):
        return x @ self.weight.t()
