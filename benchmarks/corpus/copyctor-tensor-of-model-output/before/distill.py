import torch
import torch.nn.functional as F


def distill_loss(student_logits, teacher_logits, T=2.0):
    p_t = F.softmax(teacher_logits / T, dim=-1)
    log_p_s = F.log_softmax(student_logits / T, dim=-1)
    return F.kl_div(log_p_s, p_t, reduction="batchmean") * T * T
