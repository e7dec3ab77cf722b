"""Backward through the masked embeddings works and matches the reference."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "token_drop.py"))
emb = torch.randn(2, 6, 4, requires_grad=True)
out = ns["token_dropout"](emb, 0.5, generator=torch.Generator().manual_seed(0))
out.sum().backward()
drop = torch.rand(2, 6, generator=torch.Generator().manual_seed(0)) < 0.5
expected = (~drop).float()[..., None].expand(2, 6, 4) / 0.5
assert torch.allclose(emb.grad, expected)
print("OK: in-place edits of a mask that needs no grad are fine")
