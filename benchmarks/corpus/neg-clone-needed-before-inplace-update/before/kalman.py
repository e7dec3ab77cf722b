import torch


def correct(state, gain, innovation):
    state.add_(gain @ innovation)
    return state
