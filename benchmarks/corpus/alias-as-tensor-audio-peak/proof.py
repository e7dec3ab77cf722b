"""With a float32 waveform as_tensor shares memory, so the raw copy is already normalized."""
import runpy
from pathlib import Path

import numpy as np

ns = runpy.run_path(str(Path(__file__).parent / "after" / "audio.py"))
wave = (np.random.default_rng(0).standard_normal(64) * 3).astype(np.float32)
orig = wave.copy()
model_input, raw_copy = ns["load_pair"](wave)
assert not np.allclose(wave, orig), "the caller's waveform was not modified"
assert np.isclose(np.abs(raw_copy).max(), 1.0)
assert np.allclose(raw_copy, orig / np.abs(orig).max())
print("OK: the caller's float32 waveform was normalized in place through as_tensor")
