import torch
import torch.nn.functional as F


def distill_loss(student_logits, teacher_logits, T=2.0):
    p_t = F.softmax(teacher_logits / T, dim=-1)
    p_s = torch.tensor(F.softmax(student_logits / T, dim=-1), dtype=torch.float32)
    return F.kl_div(p_s.clamp_min(1e-8).log(), p_t, reduction="batchmean") * T * T
