import torch
import torch.nn.functional as F
from torch import nn


def train_one_epoch(model: nn.Module, loader, optimizer, log_every=100):
    model.train()
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % log_every == 0:
            print(f"step {step}: loss {loss.item():.4f}")
