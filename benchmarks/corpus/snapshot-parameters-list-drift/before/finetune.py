import torch
import torch.nn.functional as F


def finetune(model, batches, lr=1e-2):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model
