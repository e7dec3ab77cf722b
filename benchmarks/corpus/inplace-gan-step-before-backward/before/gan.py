import torch
import torch.nn.functional as F
from torch import nn


def train_step(G: nn.Module, D: nn.Module, opt_g, opt_d, real, z):
    fake = G(z)
    d_real, d_fake = D(real), D(fake.detach())
    d_loss = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_out = D(fake)
    g_loss = F.binary_cross_entropy_with_logits(g_out, torch.ones_like(g_out))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    return d_loss.item(), g_loss.item()
