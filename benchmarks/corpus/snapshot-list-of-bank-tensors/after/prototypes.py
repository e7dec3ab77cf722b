import torch


class PrototypeBank:
    def __init__(self, n_classes, dim, momentum=0.9):
        self.bank = [torch.zeros(dim) for _ in range(n_classes)]
        self.m = momentum

    @torch.no_grad()
    def update(self, feats, labels):
        old = list(self.bank)
        for c in labels.unique().tolist():
            self.bank[c].mul_(self.m).add_(feats[labels == c].mean(0), alpha=1 - self.m)
        return max((new - prev).norm().item() for new, prev in zip(self.bank, old))
