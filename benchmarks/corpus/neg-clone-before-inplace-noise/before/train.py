import torch
import torch.nn.functional as F


def denoise_loss(model, clean, sigma):
    pred = model(clean)
    return F.mse_loss(pred, clean)
