import torch
import torch.nn.functional as F


def fit(model, train_batches, val_batch, optimizer, epochs):
    best_loss = float("inf")
    for epoch in range(epochs):
        model.train()
        for x, y in train_batches:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(model(val_batch[0]), val_batch[1]).item()
        if val < best_loss:
            best_loss = val
    return best_loss
