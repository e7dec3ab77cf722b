import numpy as np
import torch
from torch import nn


class TextModel(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.out(self.embed(ids))


def dump_embeddings(model: TextModel, path):
    table = model.embed.weight.numpy()
    np.savetxt(path, table, delimiter="\t")
