import torch


class Confusion:
    def __init__(self, n):
        self.stats = {"tp": torch.zeros(n), "fp": torch.zeros(n)}

    def update(self, pred, target):
        n = self.stats["tp"].numel()
        self.stats["tp"] += torch.bincount(pred[pred == target], minlength=n).float()
        self.stats["fp"] += torch.bincount(pred[pred != target], minlength=n).float()
