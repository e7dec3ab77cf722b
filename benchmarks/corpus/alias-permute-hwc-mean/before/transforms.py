import torch


class ToCHW:
    def __init__(self, mean):
        self.mean = torch.as_tensor(mean, dtype=torch.float32)

    def __call__(self, img_hwc):
        chw = img_hwc.permute(2, 0, 1)
        return chw - self.mean[:, None, None]


def sample_for_grid(img_hwc, transform):
    return transform(img_hwc), img_hwc
