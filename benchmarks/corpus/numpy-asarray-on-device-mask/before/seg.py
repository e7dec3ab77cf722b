import numpy as np
import torch


@torch.no_grad()
def predict_masks(model, images, device, thr=0.5):
    return torch.sigmoid(model(images.to(device))) > thr
