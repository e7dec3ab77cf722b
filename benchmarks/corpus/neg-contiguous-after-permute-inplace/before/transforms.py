import torch


class ToCHW:
    def __init__(self, mean):
        self.mean = torch.as_tensor(mean, dtype=torch.float32)

    def __call__(self, img_hwc):
        return img_hwc.permute(2, 0, 1) - self.mean[:, None, None]
