import torch

MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])


def prepare_batch(images):
    """images: (N, 3, H, W) floats in [0, 1]."""
    x = (images - MEAN[:, None, None]) / STD[:, None, None]
    previews = images[:4]
    return x, previews
