"""The export rounds the live weights: the reference output after export is wrong."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "export.py"))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
model = Net()
x = torch.randn(2, 4)
w0 = model.fc.weight.detach().clone()
with torch.no_grad():
    expected = model(x)
q, scale, ref = ns["export_and_check"](model, x)
assert not torch.equal(model.fc.weight.detach(), w0), "weights unchanged"
assert not torch.allclose(ref, expected)
assert torch.equal(q, (w0 / scale).round().to(torch.int8))
print("OK: export_int8 overwrote the model's float weights")
