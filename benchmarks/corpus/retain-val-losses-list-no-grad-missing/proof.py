"""Every stored loss still holds saved activations; with .item() nothing is held."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "validate.py"))


def saved_bytes(t, exclude):
    seen, stack, total, ptrs = set(), [t.grad_fn], 0, set(exclude)
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(n for n, _ in fn.next_functions)
        for name in dir(fn):
            if name.startswith("_saved_"):
                v = getattr(fn, name)
                if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() not in ptrs:
                    ptrs.add(v.untyped_storage().data_ptr())
                    total += v.untyped_storage().nbytes()
    return total


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 256), nn.Tanh(), nn.Linear(256, 1))
loader = [(torch.randn(32, 8), torch.randn(32, 1)) for _ in range(4)]
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
avg, kept = ns["validate"](model, loader)
held = sum(saved_bytes(loss, params) for loss in kept)
assert all(loss.grad_fn is not None for loss in kept)
assert held >= 4 * 32 * 256 * 4, held  # at least every batch's tanh output
print(f"OK: the stored losses hold {held} bytes of saved activations")
