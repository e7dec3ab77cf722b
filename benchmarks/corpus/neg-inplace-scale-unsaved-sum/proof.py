"""Gradients equal those of the out-of-place version."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "encoder.py"))
torch.manual_seed(0)
enc = ns["PosEncoder"](4, 3)
x = torch.randn(2, 3, 4, requires_grad=True)
params = [x, *enc.parameters()]
g1 = torch.autograd.grad(enc(x).pow(2).sum(), params)
ref = torch.tanh((enc.fc(x) + enc.pos) * 0.5)
g2 = torch.autograd.grad(ref.pow(2).sum(), params)
assert all(torch.allclose(a, b) for a, b in zip(g1, g2))
print("OK: the in-place scale of an unsaved sum is safe")
