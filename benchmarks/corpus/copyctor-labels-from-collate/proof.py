"""With a collated batch the step warns 'To copy construct from a tensor'."""
import runpy
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import default_collate

ns = runpy.run_path(str(Path(__file__).parent / "after" / "step.py"))
torch.manual_seed(0)
batch = default_collate([{"input": torch.randn(4), "labels": i % 3} for i in range(6)])
assert isinstance(batch["labels"], torch.Tensor)
model = nn.Linear(4, 3)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ns["training_step"](model, batch, torch.optim.SGD(model.parameters(), lr=0.1))
assert any("To copy construct from a tensor" in str(w.message) for w in caught), [str(w.message) for w in caught]
print("OK: torch.tensor(tensor) warned")
