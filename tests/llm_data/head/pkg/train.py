import copy

import torch


def fit(model, opt, loader, epochs: int):
    best = None
    best_loss = float("inf")
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss)
            if loss.item() < best_loss:
                best_loss = loss.item()
                best = weights(model)
    return best, losses


def weights(model):
    return model.state_dict()
