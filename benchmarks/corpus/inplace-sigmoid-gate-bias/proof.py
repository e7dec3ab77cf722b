"""backward() fails: the sigmoid output it saved was changed in place."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "model.py"))
torch.manual_seed(0)
block = ns["GatedBlock"](4)
out = block(torch.randn(3, 4))
try:
    out.sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
print("OK: backward raised 'modified by an inplace operation'")
