import copy

import torch
from torch import nn


class ModelEma(nn.Module):
    def __init__(self, model, decay=0.999):
        super().__init__()
        self.module = copy.deepcopy(model).eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
            if ema_v.is_floating_point():
                ema_v.mul_(self.decay).add_(model_v.detach(), alpha=1 - self.decay)
            else:
                ema_v.copy_(model_v)
