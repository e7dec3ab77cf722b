"""The caller's array is unchanged and the results are right."""
import runpy
from pathlib import Path

import numpy as np

ns = runpy.run_path(str(Path(__file__).parent / "after" / "audio.py"))
wave = (np.random.default_rng(0).standard_normal(64) * 3).astype(np.float32)
orig = wave.copy()
r = ns["rms"](wave)
y = ns["peak_normalize"](wave)
assert np.array_equal(wave, orig)
assert abs(r - float(np.sqrt(np.mean(orig.astype(np.float64) ** 2)))) < 1e-4
assert np.isclose(np.abs(y.numpy()).max(), 1.0)
print("OK: as_tensor with read-only use is fine")
