"""The detached write bumps probs' version: backward raises."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "router.py"))
torch.manual_seed(0)
router = ns["Router"](4, 8, threshold=0.2)
probs = router(torch.randn(5, 4))
assert router.last_sparsity > 0
try:
    (probs * torch.arange(8.0)).sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
print("OK: the write through detach() broke softmax's saved output")
