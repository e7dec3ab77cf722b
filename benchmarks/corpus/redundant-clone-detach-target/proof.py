"""clone().detach() puts a CloneBackward0 node on the graph; detach().clone() gives the same loss without it."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "selfdistill.py"))
out = torch.randn(4, 3, requires_grad=True) * 2
assert type(out.clone().grad_fn).__name__ == "CloneBackward0"  # the intermediate of clone().detach()
assert out.detach().clone().grad_fn is None
loss = ns["self_distill_loss"](out, generator=torch.Generator().manual_seed(0))
target = out.detach().clone()
target.add_(0.1 * torch.randn(target.shape, generator=torch.Generator().manual_seed(0)))
assert torch.equal(loss, F.mse_loss(out, target))
print("OK: same values; clone().detach() recorded the copy in the graph")
