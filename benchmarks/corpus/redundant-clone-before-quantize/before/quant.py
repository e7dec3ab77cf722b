import torch
from torch import nn


def weight_scales(model: nn.Module):
    return {n: p.detach().abs().max().item() / 127 for n, p in model.named_parameters() if p.dim() > 1}
