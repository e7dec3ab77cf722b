import numpy as np
import torch


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            total += m.mean() * abs(conf[m].mean() - correct[m].mean())
    return float(total)


def calibration_report(model, x, y):
    probs = torch.softmax(model(x), dim=1)
    confidences = probs.max(dim=1).values
    correct = (probs.argmax(dim=1) == y).numpy()
    return ece(np.asarray(confidences), correct)
