"""The caller's clean batch is unchanged and the loss compares against it."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train.py"))
clean = torch.rand(4, 8)
orig = clean.clone()
loss = ns["denoise_loss"](lambda x: torch.zeros_like(x), clean, 0.5, generator=torch.Generator().manual_seed(0))
assert torch.equal(clean, orig)
assert torch.allclose(loss, F.mse_loss(torch.zeros(4, 8), orig))
print("OK: clone() before the in-place add kept the target intact")
