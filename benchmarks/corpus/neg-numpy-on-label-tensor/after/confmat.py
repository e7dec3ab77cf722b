import numpy as np
import torch


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros((n, n), dtype=np.int64)
    np.add.at(m, (y_true, y_pred), 1)
    return m


def evaluate(model, loader, n_classes):
    total = np.zeros((n_classes, n_classes), dtype=np.int64)
    for x, labels in loader:
        preds = model(x).argmax(dim=1)
        total += confusion_matrix(labels.numpy(), preds.numpy(), n_classes)
    return total
