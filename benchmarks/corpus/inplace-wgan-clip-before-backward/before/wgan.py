import torch
from torch import nn


def critic_step(critic: nn.Module, opt, real, fake):
    loss = critic(fake).mean() - critic(real).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
