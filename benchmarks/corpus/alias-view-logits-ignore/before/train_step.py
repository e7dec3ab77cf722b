import torch
import torch.nn.functional as F


def masked_accuracy(logits, targets, ignore_index=-100):
    flat = logits.view(-1, logits.size(-1))
    t = targets.view(-1)
    keep = t != ignore_index
    return (flat[keep].argmax(-1) == t[keep]).float().mean()


def step(logits, targets):
    acc = masked_accuracy(logits.detach(), targets)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)
    return loss, acc
