"""The gradients differ from the true gradients of the loss that was computed."""
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
opt = torch.optim.SGD(critic.parameters(), lr=0.0)  # lr 0: keep the grads, do not move
ns["critic_step"](critic, opt, real, fake, clip=0.05)
got = critic[0].weight.grad.clone()
ref_critic = make()
(ref_critic(fake).mean() - ref_critic(real).mean()).backward()
assert not torch.allclose(got, ref_critic[0].weight.grad), "gradients agree"
print("OK: clipping through .data before backward changed the gradients silently")
