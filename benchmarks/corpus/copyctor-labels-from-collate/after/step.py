import torch
import torch.nn.functional as F


def training_step(model, batch, optimizer):
    logits = model(batch["input"])
    labels = torch.tensor(batch["labels"], dtype=torch.long)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
