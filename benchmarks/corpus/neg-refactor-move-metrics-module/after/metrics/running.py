import torch


class Running:
    def __init__(self):
        self.total, self.n = 0.0, 0

    def add(self, loss: torch.Tensor) -> None:
        self.total += loss.item()
        self.n += 1

    @property
    def mean(self) -> float:
        return self.total / max(self.n, 1)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
