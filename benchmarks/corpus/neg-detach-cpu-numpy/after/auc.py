import numpy as np
import torch


def to_numpy(t):
    return np.asarray(t.tolist())


def scores_for_auc(model, x, device):
    model.eval()
    scores = torch.softmax(model(x.to(device)), dim=1)[:, 1]
    return scores.detach().cpu().numpy()
