import numpy as np
import torch as T


class ToFloat:
    def __call__(self, img):
        return T.as_tensor(img, dtype=T.float32) / 255.0


class Pipeline:
    def __init__(self):
        self.steps = [ToFloat()]

    def __call__(self, img):
        for step in self.steps:
            img = step(img)
        return img
