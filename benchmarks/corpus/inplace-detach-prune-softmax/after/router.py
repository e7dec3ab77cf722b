import torch
import torch.nn.functional as F
from torch import nn


class Router(nn.Module):
    def __init__(self, dim, n_experts, threshold=0.05):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.threshold = threshold
        self.last_sparsity = 0.0

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)
        pruned = probs.detach()
        pruned[pruned < self.threshold] = 0.0
        self.last_sparsity = (pruned == 0).float().mean().item()
        return probs
