import numpy as np
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@torch.no_grad()
def embed_batch(model, batch, device=DEVICE):
    return model(batch.to(device)).cpu()
