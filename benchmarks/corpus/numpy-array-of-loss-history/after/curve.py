import numpy as np
import torch.nn.functional as F


def train(model, batches, optimizer):
    curve = []
    for x, y in batches:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        curve.append(np.array(loss))
    return model, np.stack(curve)
