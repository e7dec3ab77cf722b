"""On a non-CPU device the detached logits still cannot be converted."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "val.py"))
loader = [(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))]
try:
    ns["validate"](nn.Linear(3, 2).to("meta"), loader, "meta")
except TypeError as exc:
    assert "device type tensor to numpy" in str(exc), exc
else:
    raise SystemExit("did not fail")
assert ns["validate"](nn.Linear(3, 2), loader, "cpu").shape == (4, 2)
print("OK: .detach().numpy() on a non-CPU tensor raised")
