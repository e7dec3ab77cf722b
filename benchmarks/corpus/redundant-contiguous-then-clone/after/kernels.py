import torch


@torch.no_grad()
def export_kernel(weight, scale=1.0):
    k = weight.t().contiguous().clone()
    k.mul_(scale)
    return k
