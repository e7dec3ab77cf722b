import torch


class Ring:
    def __init__(self, capacity, dim):
        self.data = torch.zeros(capacity, dim)
        self.pos = 0
