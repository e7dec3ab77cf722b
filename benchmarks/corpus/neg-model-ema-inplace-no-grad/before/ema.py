import copy

import torch
from torch import nn


class ModelEma(nn.Module):
    def __init__(self, model, decay=0.999):
        super().__init__()
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
