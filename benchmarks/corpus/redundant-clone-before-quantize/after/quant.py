import torch
from torch import nn


def weight_scales(model: nn.Module):
    return {n: p.detach().abs().max().item() / 127 for n, p in model.named_parameters() if p.dim() > 1}


@torch.no_grad()
def quantize_weights(model: nn.Module):
    out = {}
    for name, scale in weight_scales(model).items():
        w = model.get_parameter(name).detach()
        out[name] = torch.quantize_per_tensor(w.clone(), scale, 0, torch.qint8)
    return out
