import math

import torch
from torch import nn


class ScaledLinear(nn.Module):
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fan_out, fan_in) / math.sqrt(fan_in))
