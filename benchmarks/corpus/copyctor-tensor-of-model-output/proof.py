"""The loss is detached from the student: it warns and the student gets no gradient."""
import runpy
import warnings
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "distill.py"))
torch.manual_seed(0)
student = nn.Linear(4, 3)
x = torch.randn(5, 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss = ns["distill_loss"](student(x), torch.randn(5, 3))
assert any("To copy construct from a tensor" in str(w.message) for w in caught)
assert not loss.requires_grad, "the loss still depends on the student"
print("OK: torch.tensor(student output) warned and cut the graph")
