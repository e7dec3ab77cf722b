import torch


def to_unit(xy, width, height):
    return xy / torch.tensor([width, height], dtype=xy.dtype)
