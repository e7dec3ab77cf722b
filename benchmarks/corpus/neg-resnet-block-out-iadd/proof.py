"""Gradients equal those of the out-of-place block."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "resnet.py"))
torch.manual_seed(0)
blk = ns["BasicBlock"](2)
x = torch.randn(2, 2, 5, 5, requires_grad=True)
out = blk(x)
g = torch.autograd.grad(out.pow(2).sum(), [x, *blk.parameters()])


def ref_forward(x):
    o = torch.relu(blk.bn1(blk.conv1(x)))
    o = blk.bn2(blk.conv2(o))
    return torch.relu(o + x)


ref = ref_forward(x)
g2 = torch.autograd.grad(ref.pow(2).sum(), [x, *blk.parameters()])
assert torch.allclose(out, ref) and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g, g2))
print("OK: out += identity and inplace ReLU are correct here")
