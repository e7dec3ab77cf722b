import copy


class Running:
    def __init__(self):
        self.total, self.n = 0.0, 0

    def add(self, loss):
        self.total += loss.item()
        self.n += 1


def snapshot(model):
    return copy.deepcopy(model.state_dict())
