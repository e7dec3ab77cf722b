import torch

DEVICE = torch.device("cpu")


def load(model):
    return model.to(DEVICE).eval()
