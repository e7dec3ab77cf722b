import torch


def read_clip(reader, n_frames):
    return torch.stack([reader() for _ in range(n_frames)])
