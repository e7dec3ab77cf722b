import torch
import torch.nn.functional as F


def fit(model, data, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model
