import torch


class Logger:
    def __init__(self):
        self.values = []

    def log_loss(self, loss):
        self.values.append(torch.tensor(loss.item(), dtype=torch.float64))

    def mean(self):
        return torch.stack(self.values).mean().item()
