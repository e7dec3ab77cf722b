import torch


def add_jitter(points, sigma=0.01, clip=0.05, generator=None):
    noise = (sigma * torch.randn(points.shape, generator=generator)).clamp_(-clip, clip)
    points += noise
    return points
