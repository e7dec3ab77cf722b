import torch
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    x_adv = x.detach().clone().requires_grad_(True)
    loss = F.cross_entropy(model(x_adv), y)
    grad, = torch.autograd.grad(loss, x_adv)
    return (x_adv + eps * grad.sign()).clamp(0, 1).detach()


def pgd(model, x, y, eps, alpha, steps):
    x_adv = x.detach().clone().requires_grad_(True)
    for _ in range(steps):
        loss = F.cross_entropy(model(x_adv), y)
        grad, = torch.autograd.grad(loss, x_adv)
        x_adv.add_(alpha * grad.sign())
        x_adv.clamp_(0, 1)
    return x_adv.detach()
