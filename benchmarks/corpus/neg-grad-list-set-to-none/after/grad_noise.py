import torch


def grad_cosines(model, optimizer, loss_fn, batches):
    params = [p for p in model.parameters() if p.requires_grad]
    cosines, last_grads = [], None
    for batch in batches:
        optimizer.zero_grad()
        loss_fn(model, batch).backward()
        if last_grads is not None:
            cur = torch.cat([p.grad.flatten() for p in params])
            prev = torch.cat([g.flatten() for g in last_grads])
            cosines.append(torch.nn.functional.cosine_similarity(cur, prev, dim=0).item())
        last_grads = [p.grad for p in params]
        optimizer.step()
    return cosines
