from torch import nn


def make_mlp(dim, hidden, out, p=0.1):
    return nn.Sequential(
        nn.Linear(dim, hidden),
        nn.ReLU(),
        nn.Linear(hidden, out),
    )
