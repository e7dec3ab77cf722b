import torch
from torch import nn


class RunningNorm(nn.Module):
    def __init__(self, init: torch.Tensor, momentum: float = 0.1):
        super().__init__()
        self.register_buffer("running_mean", init.clone())
        self.momentum = momentum

    def forward(self, x):
        return x - self.running_mean
