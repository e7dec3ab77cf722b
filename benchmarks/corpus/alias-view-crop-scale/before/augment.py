import torch


def crop_center(frames, size, gain):
    _, _, h, w = frames.shape
    top, left = (h - size) // 2, (w - size) // 2
    center = frames[:, :, top:top + size, left:left + size]
    return center * gain


def two_views(frames, size=8, gain=1.5):
    local = crop_center(frames, size, gain)
    global_view = frames.mean(dim=(2, 3))
    return local, global_view
