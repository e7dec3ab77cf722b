"""Each stored feature tensor still holds its saved tanh activations."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train_embed.py"))
torch.manual_seed(0)
model = ns["Net"]()
loader = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(5)]
emb = ns["train_epoch"](model, loader, torch.optim.SGD(model.parameters(), lr=0.1))
saved = []
stack, seen = [emb.grad_fn], set()
while stack:
    fn = stack.pop()
    if fn is None or fn in seen:
        continue
    seen.add(fn)
    if type(fn).__name__ == "TanhBackward0":
        saved.append(fn._saved_result)
    stack.extend(n for n, _ in fn.next_functions)
assert len(saved) == 10, len(saved)  # two tanh layers x five batches, never freed
print(f"OK: {len(saved)} saved tanh outputs kept alive by the embeddings list")
