import torch


class BestCheckpoint:
    def __init__(self, path):
        self.path = path
        self.best_metric = -float("inf")
