import torch


def correct(state, gain, innovation):
    prev = state.clone()
    state.add_(gain @ innovation)
    return state, (state - prev).norm().item()
