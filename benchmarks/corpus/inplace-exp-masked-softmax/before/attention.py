import torch
import torch.nn.functional as F


def masked_softmax(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    return F.softmax(scores, dim=-1)


def attend(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    return masked_softmax(scores, mask) @ v
