import torch


def read_clip(reader, n_frames):
    frames = []
    for _ in range(n_frames):
        frames.append(reader())
    return torch.stack(frames)
