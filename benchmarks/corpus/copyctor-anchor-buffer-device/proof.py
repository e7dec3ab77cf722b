"""anchors_for warns 'To copy construct from a tensor'; the list constructor in __init__ does not."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "anchors.py"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    head = ns["AnchorHead"]([16, 32, 64])
assert not caught, [str(w.message) for w in caught]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = head.anchors_for(torch.device("cpu"))
assert any("To copy construct from a tensor" in str(w.message) for w in caught)
assert torch.equal(a, torch.tensor([16.0, 32.0, 64.0]))
print("OK: torch.tensor(buffer) warned")
