"""normalize() writes into the caller's tensor: the previews are no longer in [0, 1]."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "data.py"))
images = torch.rand(6, 3, 4, 4, generator=torch.Generator().manual_seed(0))
raw = images.clone()
x = ns["normalize"](images, ns["MEAN"], ns["STD"])
assert x is images and not torch.equal(images, raw), "the argument was not modified"
try:
    ns["prepare_batch"](raw.clone())
except AssertionError as exc:
    assert "previews" in str(exc)
else:
    raise SystemExit("prepare_batch's previews were unexpectedly still in [0, 1]")
# The out-of-place version leaves the caller's tensor alone.
y = (raw - ns["MEAN"][:, None, None]) / ns["STD"][:, None, None]
assert torch.allclose(y, x)
print("OK: normalize changed the caller's images; previews saw normalized values")
