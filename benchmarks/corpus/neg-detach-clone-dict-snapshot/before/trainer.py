import torch

DEVICE = torch.device("cpu")


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model.to(DEVICE)
        self.optimizer = optimizer
        self.best_weights = None
