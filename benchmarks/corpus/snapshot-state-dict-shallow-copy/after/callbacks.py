import torch


class BestCheckpoint:
    def __init__(self, path):
        self.path = path
        self.best_metric = -float("inf")
        self.best = None

    def on_validation_end(self, model, metric):
        if metric > self.best_metric:
            self.best_metric = metric
            self.best = model.state_dict().copy()

    def on_train_end(self, model):
        if self.best is not None:
            torch.save(self.best, self.path)
