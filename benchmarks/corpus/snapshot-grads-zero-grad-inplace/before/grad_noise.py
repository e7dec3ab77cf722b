import torch


def grad_cosines(model, optimizer, loss_fn, batches):
    params = [p for p in model.parameters() if p.requires_grad]
    cosines = []
    for batch in batches:
        optimizer.zero_grad(set_to_none=False)
        loss_fn(model, batch).backward()
        optimizer.step()
    return cosines
