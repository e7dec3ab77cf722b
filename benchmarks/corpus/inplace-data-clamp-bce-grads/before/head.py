import torch
import torch.nn.functional as F
from torch import nn


class BinaryHead(nn.Module):
    def __init__(self, dim, eps=1e-3):
        super().__init__()
        self.fc = nn.Linear(dim, 1)
        self.eps = eps

    def forward(self, x, target):
        logits = self.fc(x).squeeze(-1)
        return F.binary_cross_entropy_with_logits(logits, target)
