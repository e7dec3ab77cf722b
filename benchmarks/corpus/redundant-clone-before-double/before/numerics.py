import torch


def stable_logsumexp(logits, dim=-1):
    return torch.logsumexp(logits, dim=dim)
