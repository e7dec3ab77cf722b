import torch
import torch.nn.functional as F


def masked_softmax(scores, mask):
    scores = scores - scores.amax(dim=-1, keepdim=True)
    e = scores.exp()
    e.masked_fill_(~mask, 0.0)
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-9)


def attend(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    return masked_softmax(scores, mask) @ v
