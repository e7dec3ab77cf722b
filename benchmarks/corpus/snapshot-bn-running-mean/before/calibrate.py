import torch
from torch import nn


@torch.no_grad()
def recalibrate_bn(model: nn.Module, loader):
    model.train()
    for x in loader:
        model(x)
    model.eval()
