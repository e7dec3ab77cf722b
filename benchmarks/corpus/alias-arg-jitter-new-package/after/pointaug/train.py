import torch.nn.functional as F

from pointaug.transforms import add_jitter


def reconstruction_loss(model, clean, generator=None):
    noisy = add_jitter(clean, generator=generator)
    return F.mse_loss(model(noisy), clean)
