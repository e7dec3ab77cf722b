import torch
import torch.nn.functional as F
from torch import nn


def fit(model: nn.Module, data, lr=0.1, epochs=1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(epochs):
        for x, y in data:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model
