import torch


def stable_logsumexp(logits, dim=-1):
    x = logits.clone().double()
    m = x.amax(dim=dim, keepdim=True)
    x.sub_(m).exp_()
    return (x.sum(dim=dim).log() + m.squeeze(dim)).to(logits.dtype)
