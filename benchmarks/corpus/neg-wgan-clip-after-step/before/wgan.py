import torch


def critic_step(critic, opt, real, fake):
    loss = critic(fake).mean() - critic(real).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
