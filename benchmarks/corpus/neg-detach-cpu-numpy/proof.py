"""The conversion works on an output that requires grad."""
import runpy
from pathlib import Path

import numpy as np
import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "auc.py"))
torch.manual_seed(0)
model = nn.Linear(3, 2)
out = ns["scores_for_auc"](model, torch.randn(6, 3), "cpu")
assert isinstance(out, np.ndarray) and out.shape == (6,)
print("OK: .detach().cpu().numpy() is the safe conversion")
