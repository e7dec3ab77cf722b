import torch
from torch import nn


@torch.no_grad()
def recalibrate_bn(model: nn.Module, loader):
    bn = next(m for m in model.modules() if isinstance(m, nn.BatchNorm1d))
    start_mean = bn.running_mean
    model.train()
    for x in loader:
        model(x)
    model.eval()
    return (bn.running_mean - start_mean).abs().max().item()
