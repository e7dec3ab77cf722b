import numpy as np
import torch


@torch.no_grad()
def predict_masks(model, images, device, thr=0.5):
    return torch.sigmoid(model(images.to(device))) > thr


def save_masks(model, images, device, writer):
    masks = predict_masks(model, images, device)
    for i, mask in enumerate(masks):
        writer(i, np.asarray(mask, dtype=np.uint8) * 255)
