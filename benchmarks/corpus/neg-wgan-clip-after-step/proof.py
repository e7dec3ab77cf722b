"""Same gradients as the true ones, and the weights end up clipped."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "wgan.py"))


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


g = torch.Generator().manual_seed(1)
real, fake = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
critic = make()
ns["critic_step"](critic, torch.optim.SGD(critic.parameters(), lr=0.0), real, fake, clip=0.05)
ref = make()
(ref(fake).mean() - ref(real).mean()).backward()
assert torch.allclose(critic[0].weight.grad, ref[0].weight.grad)
assert all(p.abs().max() <= 0.05 for p in critic.parameters())
print("OK: clipping after the step is harmless to autograd")
