import torch
import torch.nn.functional as F


def fit(model, data, lr=0.1):
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return model
