import torch
import torch.nn.functional as F


def consistency_loss(student_out, teacher_out):
    return F.mse_loss(student_out, teacher_out.detach())


def self_distill_loss(student_out, noise_std=0.1, generator=None):
    target = student_out.clone().detach()
    target.add_(noise_std * torch.randn(target.shape, generator=generator))
    return F.mse_loss(student_out, target)
