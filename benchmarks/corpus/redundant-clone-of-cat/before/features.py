import torch


def build_features(numeric, embedded):
    return torch.cat([numeric, embedded], dim=1)
