import torch


def gaussian_noise(batch, dim, std=1.0):
    return torch.randn(batch, dim) * std
