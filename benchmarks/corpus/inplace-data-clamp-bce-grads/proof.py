"""No error, but the gradients differ from those of the function actually computed."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "head.py"))
torch.manual_seed(0)
head = ns["BinaryHead"](3, eps=0.05)
with torch.no_grad():
    head.fc.weight.fill_(4.0)
x = torch.randn(16, 3)
target = torch.randint(0, 2, (16,)).float()
loss = head(x, target)
loss.backward()
g_data = head.fc.weight.grad.clone()
head.zero_grad()
probs = torch.sigmoid(head.fc(x).squeeze(-1)).clamp(0.05, 0.95)
ref = F.binary_cross_entropy(probs, target)
ref.backward()
assert torch.allclose(loss, ref), "forward values should agree"
assert not torch.allclose(g_data, head.fc.weight.grad, atol=1e-4), (g_data, head.fc.weight.grad)
print("OK: same loss, different gradients: the .data clamp was hidden from autograd")
