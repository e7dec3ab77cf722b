import torch

DEVICE = torch.device("cpu")


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model.to(DEVICE)
        self.optimizer = optimizer
        self.best_weights = None

    def remember_best(self):
        self.best_weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def restore_best(self):
        self.model.load_state_dict(self.best_weights)
