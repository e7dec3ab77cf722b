import torch
import torch.nn.functional as F


def consistency_loss(student_out, teacher_out):
    return F.mse_loss(student_out, teacher_out.detach())
