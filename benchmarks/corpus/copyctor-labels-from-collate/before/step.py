import torch
import torch.nn.functional as F


def training_step(model, batch, optimizer):
    logits = model(batch["input"])
    loss = F.cross_entropy(logits, batch["labels"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
