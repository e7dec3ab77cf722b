"""The gradients are clipped in place (the intent) and the parameters are untouched."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "agc.py"))
torch.manual_seed(0)
m = nn.Linear(4, 3)
(m(torch.randn(8, 4)) * 100).sum().backward()
w0, g0 = m.weight.detach().clone(), m.weight.grad.clone()
ns["adaptive_clip_grad"](m.parameters(), clip_factor=0.01)
assert torch.equal(m.weight.detach(), w0)
row_max = 0.01 * w0.norm(dim=1, keepdim=True).clamp(min=1e-3)
assert (m.weight.grad.norm(dim=1, keepdim=True) <= row_max * 1.0001).all() and not torch.equal(m.weight.grad, g0)
print("OK: AGC wrote the clipped gradients back on purpose")
