import torch


def critic_step(critic, opt, real, fake, clip=0.01):
    loss = critic(fake).mean() - critic(real).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for p in critic.parameters():
        p.data.clamp_(-clip, clip)
    return loss.item()
