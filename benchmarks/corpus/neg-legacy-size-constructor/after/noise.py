import torch


def gaussian_noise(batch, dim, std=1.0):
    out = torch.FloatTensor(batch, dim)
    return out.normal_(0.0, std)


def uniform_bias(n):
    return torch.Tensor(n).uniform_(-0.1, 0.1)
