import torch


def smooth(xs, decay=0.9):
    state = torch.zeros_like(xs[0])
    deltas = []
    for x in xs:
        new_state = decay * state + (1 - decay) * x
        deltas.append((new_state - state).norm().item())
        state = new_state
    return state, deltas
