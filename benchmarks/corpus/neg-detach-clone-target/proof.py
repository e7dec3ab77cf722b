"""The student output is unchanged and backward works; the copy recorded no graph node."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "selfdistill.py"))
out = torch.randn(4, 3, requires_grad=True) * 2
before = out.detach().clone()
loss = ns["self_distill_loss"](out, generator=torch.Generator().manual_seed(0))
assert torch.equal(out.detach(), before)
loss.backward()
assert out.detach().clone().grad_fn is None
print("OK: detach().clone() is the right copy here")
