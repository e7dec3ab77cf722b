"""Without the clone the cached slice keeps the whole sorted tensor's storage alive."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "cache.py"))
c = ns["LogitCache"]()
logits = torch.randn(2, 5000)
vals, idx = c.keep_topk(logits, 3)
assert vals.untyped_storage().nbytes() == 2 * 3 * 4
view = logits.sort(dim=-1, descending=True).values[:, :3]
assert view.untyped_storage().nbytes() == 2 * 5000 * 4
print("OK: the clone drops a 40 kB storage for a 24 B one")
