"""Backward raises: LayerNorm's saved input was changed by the in-place residual."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "transformer.py"))
torch.manual_seed(0)
enc = ns["Encoder"](50)
out = enc(torch.randint(0, 50, (2, 5)))
try:
    out.pow(2).mean().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
# With only the MLP residual in place the error persists (ln2 saved x too).
blk = ns["Block"](16, 2)
x = torch.randn(2, 5, 16, requires_grad=True) * 1
h = blk.ln2(x)
x += blk.mlp(h)
try:
    x.sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc)
else:
    raise SystemExit("the second residual alone did not fail")
print("OK: in-place residual adds broke LayerNorm's saved inputs")
