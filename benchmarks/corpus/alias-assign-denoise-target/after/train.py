import torch
import torch.nn.functional as F


def denoise_loss(model, clean, sigma, generator=None):
    noisy = clean
    noisy.add_(sigma * torch.randn(clean.shape, generator=generator))
    pred = model(noisy)
    return F.mse_loss(pred, clean)


def train_epoch(model, loader, optimizer, sigma=0.1):
    model.train()
    for clean in loader:
        optimizer.zero_grad()
        loss = denoise_loss(model, clean, sigma)
        loss.backward()
        optimizer.step()
