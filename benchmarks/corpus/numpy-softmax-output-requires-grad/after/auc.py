import numpy as np
import torch


def rank_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    order = np.argsort(scores)
    ranks = np.empty_like(order, dtype=float)
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate_auc(model, x, y):
    model.eval()
    scores = torch.softmax(model(x), dim=1)[:, 1].numpy()
    return rank_auc(scores, y.numpy())
