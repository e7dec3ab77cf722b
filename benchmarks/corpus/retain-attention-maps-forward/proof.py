"""After a few training steps without backward of the stored maps, their graphs are alive."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "attn.py"))
torch.manual_seed(0)
m = ns["SelfAttention"](8)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    out = m(torch.randn(2, 4, 8))
    opt.zero_grad()
    out.pow(2).mean().backward()
    opt.step()
# the loss graph was freed by backward, but the stored maps still point into graphs
assert len(m.attn_maps) == 3 and all(a.grad_fn is not None for a in m.attn_maps)
# in evaluation without no_grad the saved tensors stay alive, too
m.attn_maps.clear()
m(torch.randn(2, 4, 8))
fn = m.attn_maps[0].grad_fn
assert type(fn).__name__ == "SoftmaxBackward0" and fn._saved_result.shape == (2, 4, 4)
print("OK: attn_maps keeps graph-attached tensors of every forward")
