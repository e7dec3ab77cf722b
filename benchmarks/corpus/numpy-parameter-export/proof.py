"""Exporting raises 'Can't call numpy() on Tensor that requires grad'."""
import runpy
import tempfile
from pathlib import Path

from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "export_np.py"))
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
with tempfile.TemporaryDirectory() as d:
    try:
        ns["export_weights"](model, d)
    except RuntimeError as exc:
        assert "requires grad" in str(exc), exc
    else:
        raise SystemExit("export did not fail")
print("OK: parameter.numpy() raised")
