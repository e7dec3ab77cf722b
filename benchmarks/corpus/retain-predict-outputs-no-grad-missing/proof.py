"""The concatenated predictions require grad and keep every batch's graph."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "infer.py"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
loader = [torch.randn(8, 4) for _ in range(3)]
out = ns["predict"](model, loader)
assert out.requires_grad and out.grad_fn is not None
# CatBackward links to one graph per batch; each still holds its tanh output
tanh_nodes = []
stack, seen = [out.grad_fn], set()
while stack:
    fn = stack.pop()
    if fn is None or fn in seen:
        continue
    seen.add(fn)
    if type(fn).__name__ == "TanhBackward0":
        tanh_nodes.append(fn._saved_result)
    stack.extend(n for n, _ in fn.next_functions)
assert len(tanh_nodes) == 3, len(tanh_nodes)
with torch.no_grad():
    ref = torch.cat([model(x) for x in loader])
assert torch.equal(out.detach(), ref)
print("OK: predict kept 3 graphs with their saved activations")
