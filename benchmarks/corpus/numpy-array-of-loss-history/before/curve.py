import numpy as np
import torch.nn.functional as F


def train(model, batches, optimizer):
    for x, y in batches:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model
