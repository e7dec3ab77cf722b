import torch


def build_features(numeric, embedded, clip=5.0):
    feats = torch.cat([numeric, embedded], dim=1).clone()
    feats.clamp_(-clip, clip)
    return feats
