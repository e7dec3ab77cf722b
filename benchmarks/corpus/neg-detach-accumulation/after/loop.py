import torch


def run_epoch(model, loader, criterion, optimizer):
    total = torch.zeros(())
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(loader)
