import torch
from torch import nn


def make_criterion(labels, n_classes):
    return nn.CrossEntropyLoss()
