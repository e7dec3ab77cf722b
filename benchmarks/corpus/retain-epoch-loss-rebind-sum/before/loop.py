import torch
from torch import nn


def run_epoch(model: nn.Module, loader, criterion, optimizer):
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
