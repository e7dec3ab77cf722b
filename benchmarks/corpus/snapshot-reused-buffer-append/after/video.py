import torch


def read_clip(reader, n_frames, shape):
    buf = torch.empty(shape)
    frames = []
    for _ in range(n_frames):
        buf.copy_(reader())
        frames.append(buf)
    return torch.stack(frames)
