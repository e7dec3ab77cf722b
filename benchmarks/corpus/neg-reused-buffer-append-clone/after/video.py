import torch


def read_clip(reader, n_frames, shape, gain=1.0):
    buf = torch.empty(shape)
    frames = []
    for _ in range(n_frames):
        buf.copy_(reader())
        buf.mul_(gain)
        frames.append(buf.clone())
    return torch.stack(frames)
