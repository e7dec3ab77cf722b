import numpy as np
import torch
from torch import nn


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def export_weights(model: nn.Module, out_dir):
    for name, layer in model.named_modules():
        if isinstance(layer, nn.Linear):
            np.save(f"{out_dir}/{name}.npy", layer.weight.numpy())
