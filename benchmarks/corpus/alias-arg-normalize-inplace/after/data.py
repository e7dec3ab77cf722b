import torch

MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])


def normalize(images, mean, std):
    images.sub_(mean[:, None, None]).div_(std[:, None, None])
    return images


def prepare_batch(images):
    """images: (N, 3, H, W) floats in [0, 1]."""
    x = normalize(images, MEAN, STD)
    previews = images[:4]
    assert previews.min() >= 0, "previews must be in [0, 1]"
    return x, previews
