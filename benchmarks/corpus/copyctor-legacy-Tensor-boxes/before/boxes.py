import torch
from torch import nn


class BoxEncoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.proj = nn.Linear(4, dim)

    def forward(self, boxes):
        return self.proj(boxes)
