"""Running the pipeline on an ndarray warns 'To copy construct from a tensor'."""
import runpy
import warnings
from pathlib import Path

import numpy as np

ns = runpy.run_path(str(Path(__file__).parent / "after" / "preprocess.py"))
img = np.random.default_rng(0).integers(0, 256, (4, 4, 3), dtype=np.uint8)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = ns["Pipeline"]()(img)
assert any("To copy construct from a tensor" in str(w.message) for w in caught)
assert np.allclose(out.numpy(), img / 255.0)
print("OK: T.tensor(tensor) warned")
