"""With .cuda() standing in as a move to 'meta', idx.numpy() raises the device error."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "mining.py"))
original = torch.Tensor.cuda
torch.Tensor.cuda = lambda self, *a, **k: self.to("meta")
try:
    try:
        ns["hard_negative_ids"](torch.randn(4, 8), torch.randn(10, 8), k=3)
    except TypeError as exc:
        assert "device type tensor to numpy" in str(exc), exc
    else:
        raise SystemExit(".numpy() on the moved tensor did not fail")
finally:
    torch.Tensor.cuda = original
print("OK: .numpy() on a tensor moved off the CPU raised")
