from torch import tensor


class EMAMetric:
    def __init__(self, beta=0.9):
        self.beta = beta
        self.value = None
