"""Gradients equal those of the same network with out-of-place ReLUs."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "mlp.py"))
torch.manual_seed(0)
m = ns["make_mlp"](4, 8, 2)
ref = nn.Sequential(*[nn.ReLU() if isinstance(l, nn.ReLU) else l for l in m])
x = torch.randn(6, 4)
g1 = torch.autograd.grad(m(x).pow(2).sum(), list(m.parameters()))
g2 = torch.autograd.grad(ref(x).pow(2).sum(), list(m.parameters()))
assert all(torch.allclose(a, b) for a, b in zip(g1, g2))
print("OK: ReLU(inplace=True) after Linear/BN is safe")
