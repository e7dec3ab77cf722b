"""The conversion works and gives the probabilities."""
import runpy
from pathlib import Path

import numpy as np
import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "predict.py"))
model = ns["load"](nn.Linear(3, 4))
p = ns["predict_proba"](model, torch.randn(5, 3))
assert isinstance(p, np.ndarray) and np.allclose(p.sum(1), 1.0, atol=1e-6)
print("OK: .numpy() under no_grad on CPU is fine")
