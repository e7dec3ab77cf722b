"""torch.Tensor(t) is an alias that keeps t's dtype: float64 boxes break the float32 encoder."""
import runpy
from pathlib import Path

import numpy as np
import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "boxes.py"))
boxes64 = torch.from_numpy(np.array([[0.0, 0.0, 10.0, 20.0]]))
alias = torch.Tensor(boxes64)
assert alias.dtype == torch.float64, "torch.Tensor converted the dtype"
assert alias.untyped_storage().data_ptr() == boxes64.untyped_storage().data_ptr(), "torch.Tensor copied"
enc = ns["BoxEncoder"]()
try:
    enc(boxes64)
except RuntimeError as exc:
    assert "dtype" in str(exc), exc
else:
    raise SystemExit("the float64 boxes did not fail")
enc(torch.as_tensor(boxes64, dtype=torch.float32))
print("OK: torch.Tensor(tensor) neither copied nor converted")
