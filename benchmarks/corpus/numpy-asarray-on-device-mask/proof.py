"""np.asarray on a non-CPU mask raises (meta standing in for cuda)."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "seg.py"))
written = {}
try:
    ns["save_masks"](nn.Conv2d(3, 1, 1).to("meta"), torch.randn(2, 3, 4, 4), "meta", written.__setitem__)
except TypeError as exc:
    assert "device type tensor to numpy" in str(exc), exc
else:
    raise SystemExit("did not fail")
ns["save_masks"](nn.Conv2d(3, 1, 1), torch.randn(2, 3, 4, 4), "cpu", written.__setitem__)
assert len(written) == 2
print("OK: np.asarray on a non-CPU tensor raised")
