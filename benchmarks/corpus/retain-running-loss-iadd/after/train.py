import torch
import torch.nn.functional as F
from torch import nn


def train_one_epoch(model: nn.Module, loader, optimizer, log_every=100):
    model.train()
    running_loss = 0.0
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss
        if step % log_every == 0:
            print(f"step {step}: loss {running_loss / (step + 1):.4f}")
    return running_loss / len(loader)
