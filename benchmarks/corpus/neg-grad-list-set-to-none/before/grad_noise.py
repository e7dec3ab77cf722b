import torch


def grad_cosines(model, optimizer, loss_fn, batches):
    cosines = []
    for batch in batches:
        optimizer.zero_grad()
        loss_fn(model, batch).backward()
        optimizer.step()
    return cosines
