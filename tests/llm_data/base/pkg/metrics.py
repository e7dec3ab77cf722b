import torch


def summarize(scores: torch.Tensor):
    total = scores.sum()
    snapshot = scores.detach().clone()
    return total, snapshot
