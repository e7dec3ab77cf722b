import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.smooth = None

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.smooth = loss if self.smooth is None else 0.98 * self.smooth + 0.02 * loss
        return float(self.smooth)
