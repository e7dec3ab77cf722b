import torch
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    x_adv = x.detach().clone().requires_grad_(True)
    loss = F.cross_entropy(model(x_adv), y)
    grad, = torch.autograd.grad(loss, x_adv)
    return (x_adv + eps * grad.sign()).clamp(0, 1).detach()
