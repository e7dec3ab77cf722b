import numpy as np
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@torch.no_grad()
def embed_batch(model, batch, device=DEVICE):
    return model(batch.to(device)).cpu()


@torch.no_grad()
def embed_corpus(model, batches, device=DEVICE):
    chunks = []
    for batch in batches:
        out = model(batch.to(device))
        chunks.append(out.numpy())
    return np.concatenate(chunks)
