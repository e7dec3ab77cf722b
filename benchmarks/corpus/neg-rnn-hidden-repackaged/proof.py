"""Training over several batches works; the returned hidden's graph covers one batch only."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "lm.py"))
torch.manual_seed(0)
model = ns["RNNModel"](20, 8)
batches = [(torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 5))) for _ in range(4)]
hidden = ns["train"](model, batches, torch.optim.SGD(model.parameters(), lr=0.1))
seen, stack = set(), [hidden.grad_fn]
while stack:
    fn = stack.pop()
    if fn is None or fn in seen:
        continue
    seen.add(fn)
    stack.extend(n for n, _ in fn.next_functions)
# one EmbeddingBackward0 per batch whose graph is reachable: only the last batch
assert sum(type(f).__name__ == "EmbeddingBackward0" for f in seen) == 1, sorted(type(f).__name__ for f in seen)
print("OK: the detached hidden state carries no previous graph")
