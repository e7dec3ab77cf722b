import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer):
    model.train()
    running_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    return running_loss / len(loader)
