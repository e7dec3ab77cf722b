import copy

import torch


def guarded_step(model, optimizer, loss_fn, batch):
    model_state = copy.deepcopy(model.state_dict())
    opt_state = optimizer.state_dict()
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    optimizer.step()
    if not torch.isfinite(loss):
        model.load_state_dict(model_state)
        optimizer.load_state_dict(opt_state)
        return False
    return True
