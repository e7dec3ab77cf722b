import torch
from torch import nn


def make_criterion(labels, n_classes):
    counts = torch.bincount(labels, minlength=n_classes)
    weights = torch.FloatTensor(counts)
    weights = weights.sum() / (n_classes * weights.clamp_min(1))
    return nn.CrossEntropyLoss(weight=weights)
