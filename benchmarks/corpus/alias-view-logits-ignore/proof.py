"""The caller's logits get zeroed rows (through view and detach, both aliases)."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train_step.py"))
g = torch.Generator().manual_seed(0)
logits = torch.randn(2, 5, 7, generator=g)
targets = torch.randint(0, 7, (2, 5), generator=g)
targets[0, :2] = -100
orig = logits.clone()
loss, acc = ns["step"](logits, targets)
assert not torch.equal(logits, orig), "logits unchanged"
assert (logits[0, :2] == 0).all()
print("OK: masked_accuracy zeroed rows of the caller's logits")
