from torch import nn


def make_mlp(dim, hidden, out):
    return nn.Sequential(
        nn.Linear(dim, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, out),
    )
