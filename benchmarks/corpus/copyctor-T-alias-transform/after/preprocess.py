import numpy as np
import torch as T


class ToTensor:
    def __call__(self, img):
        return T.from_numpy(np.ascontiguousarray(img))


class ToFloat:
    def __call__(self, img):
        return T.tensor(img, dtype=T.float32) / 255.0


class Pipeline:
    def __init__(self):
        self.steps = [ToTensor(), ToFloat()]

    def __call__(self, img):
        for step in self.steps:
            img = step(img)
        return img
