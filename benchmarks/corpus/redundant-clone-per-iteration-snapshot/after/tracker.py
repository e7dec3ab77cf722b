import torch


def track(observations, alpha=0.5):
    state = torch.zeros_like(observations[0][0])
    deltas = []
    for episode in observations:
        for obs in episode:
            prev = state.clone()
            state.mul_(1 - alpha).add_(obs, alpha=alpha)
            deltas.append((state - prev).abs().max().item())
    return state, deltas
