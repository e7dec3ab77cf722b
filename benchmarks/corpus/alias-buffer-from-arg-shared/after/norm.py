import torch
from torch import nn


class RunningNorm(nn.Module):
    def __init__(self, init: torch.Tensor, momentum: float = 0.1):
        super().__init__()
        self.register_buffer("running_mean", init)
        self.momentum = momentum

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(x.mean(0), alpha=self.momentum)
        return x - self.running_mean


def build_pair(dim):
    init = torch.zeros(dim)
    return RunningNorm(init), RunningNorm(init)
