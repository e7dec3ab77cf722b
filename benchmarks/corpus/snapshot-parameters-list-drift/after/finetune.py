import torch
import torch.nn.functional as F


def finetune(model, batches, lr=1e-2):
    init_params = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    drift = sum((p - p0).norm().item() for p, p0 in zip(model.parameters(), init_params))
    return model, drift
