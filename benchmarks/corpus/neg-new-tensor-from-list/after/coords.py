import torch


def to_unit(xy, width, height):
    return xy / xy.new_tensor([width, height])
