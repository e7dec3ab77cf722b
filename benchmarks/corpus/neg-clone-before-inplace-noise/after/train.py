import torch
import torch.nn.functional as F


def denoise_loss(model, clean, sigma, generator=None):
    noisy = clean.clone()
    noisy.add_(sigma * torch.randn(clean.shape, generator=generator))
    pred = model(noisy)
    return F.mse_loss(pred, clean)
