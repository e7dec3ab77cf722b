"""On a non-CPU device (meta standing in for cuda) the .numpy() call raises."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "embed.py"))
model = nn.Linear(3, 2).to("meta")
try:
    ns["embed_corpus"](model, [torch.randn(4, 3)], device="meta")
except TypeError as exc:
    assert "can't convert meta device type tensor to numpy" in str(exc), exc
else:
    raise SystemExit(".numpy() on a non-CPU tensor did not fail")
cpu_model = nn.Linear(3, 2)
assert ns["embed_corpus"](cpu_model, [torch.randn(4, 3)], device="cpu").shape == (4, 2)
print("OK: .numpy() on a tensor moved to a non-CPU device raised")
