import torch
import torch.nn.functional as F
from torch import nn


def fit(model: nn.Module, data, lr=0.1, epochs=1):
    for _ in range(epochs):
        for x, y in data:
            loss = F.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                p -= lr * p.grad
    return model
