import torch.nn.functional as F
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, ids, hidden=None):
        h, hidden = self.rnn(self.embed(ids), hidden)
        return self.out(h), hidden


def repackage_hidden(h):
    return h.detach() if h is not None else None


def train(model, batches, optimizer):
    hidden = None
    for inputs, targets in batches:
        hidden = repackage_hidden(hidden)
        logits, hidden = model(inputs, hidden)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return hidden
