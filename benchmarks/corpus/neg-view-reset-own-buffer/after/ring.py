import torch


class Ring:
    def __init__(self, capacity, dim):
        self.data = torch.zeros(capacity, dim)
        self.pos = 0

    def push(self, row):
        self.data[self.pos].copy_(row)
        self.pos = (self.pos + 1) % self.data.size(0)

    def reset(self):
        self.data.view(-1).zero_()
        self.pos = 0
