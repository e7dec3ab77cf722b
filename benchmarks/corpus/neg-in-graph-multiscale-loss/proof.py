"""Every scale receives gradient; the function returns a float."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "multiscale.py"))


class Pyramid(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Conv2d(1, 1, 1) for _ in range(3))

    def forward(self, x):
        return [h(F.avg_pool2d(x, 2 ** (2 - i))) for i, h in enumerate(self.heads)]


torch.manual_seed(0)
m = Pyramid()
opt = torch.optim.SGD(m.parameters(), lr=0.0)
val = ns["train_step"](m, torch.randn(2, 1, 8, 8), torch.randn(2, 1, 8, 8), opt)
assert isinstance(val, float)
assert all(h.weight.grad is not None and h.weight.grad.abs().sum() > 0 for h in m.heads)
print("OK: the in-graph sum is backpropagated in the same step")
