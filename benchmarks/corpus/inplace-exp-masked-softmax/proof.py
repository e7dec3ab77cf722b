"""backward() through masked_softmax fails; the out-of-place masked_fill works and matches softmax."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "attention.py"))
g = torch.Generator().manual_seed(0)
q = torch.randn(2, 4, 8, generator=g, requires_grad=True)
k = torch.randn(2, 4, 8, generator=g)
v = torch.randn(2, 4, 8, generator=g)
mask = torch.ones(2, 4, 4, dtype=torch.bool)
mask[:, :, -1] = False
out = ns["attend"](q, k, v, mask)
try:
    out.sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc) and "Exp" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
scores = q @ k.transpose(-2, -1) / 8 ** 0.5
s = scores - scores.amax(-1, keepdim=True)
e = s.exp().masked_fill(~mask, 0.0)
ref = F.softmax(scores.masked_fill(~mask, float("-inf")), -1)
assert torch.allclose(e / e.sum(-1, keepdim=True), ref, atol=1e-6)
(e.sum()).backward()
print("OK: exp's saved result was modified; the out-of-place fix backpropagates")
