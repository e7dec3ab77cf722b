from torch import nn


def make_mlp(dim, hidden, out, p=0.1):
    return nn.Sequential(
        nn.Linear(dim, hidden),
        nn.Tanh(),
        nn.Dropout(p, inplace=True),
        nn.Linear(hidden, out),
    )
