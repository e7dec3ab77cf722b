import torch


def smooth(xs, decay=0.9):
    state = torch.zeros_like(xs[0])
    deltas = []
    for x in xs:
        prev = state
        state.mul_(decay).add_(x, alpha=1 - decay)
        deltas.append((state - prev).norm().item())
    return state, deltas
