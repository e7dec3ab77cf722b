import torch


class BestCheckpoint:
    def __init__(self, path):
        self.path = path
        self.best_metric = -float("inf")

    def on_validation_end(self, model, metric):
        if metric > self.best_metric:
            self.best_metric = metric
            torch.save(model.state_dict(), self.path)
