"""No error, but the input gradient is computed with the renormalised weight."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "maxnorm.py"))
torch.manual_seed(0)
layer = ns["MaxNormLinear"](4, 3, max_norm=0.1)
w_used = layer.weight.detach().clone()
x = torch.randn(5, 4, requires_grad=True)
out = layer(x)
out.sum().backward()
x2 = x.detach().clone().requires_grad_(True)
F.linear(x2, w_used, layer.bias.detach()).sum().backward()
assert torch.allclose(out, F.linear(x.detach(), w_used, layer.bias.detach()))
assert not torch.allclose(x.grad, x2.grad), "input gradients agree"
print("OK: the input gradient used the renormalised weight, not the one of the forward")
