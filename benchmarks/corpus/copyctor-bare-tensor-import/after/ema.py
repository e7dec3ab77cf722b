from torch import tensor


class EMAMetric:
    def __init__(self, beta=0.9):
        self.beta = beta
        self.value = None

    def ema_update(self, value):
        v = tensor(value, dtype=float)
        self.value = v if self.value is None else self.beta * self.value + (1 - self.beta) * v
        return self.value
