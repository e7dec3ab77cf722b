import torch
from torch import nn


def run_epoch(model: nn.Module, loader, criterion, optimizer):
    epoch_loss = torch.zeros(())
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        epoch_loss = epoch_loss + loss
    return epoch_loss / len(loader)
