import torch


def token_dropout(emb, p, generator=None):
    b, t, _ = emb.shape
    keep = torch.ones(b, t, 1, dtype=emb.dtype)
    drop = torch.rand(b, t, generator=generator) < p
    keep[drop] = 0.0
    return emb * keep / (1 - p)
