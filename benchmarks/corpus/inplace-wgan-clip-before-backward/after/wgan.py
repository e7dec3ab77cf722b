import torch
from torch import nn


def critic_step(critic: nn.Module, opt, real, fake, clip=0.01):
    loss = critic(fake).mean() - critic(real).mean()
    opt.zero_grad()
    for p in critic.parameters():
        p.data.clamp_(-clip, clip)
    loss.backward()
    opt.step()
    return loss.item()
