"""Inputs for a subject: for every parameter an ordered list of candidate values, from its
annotation, its default, its name and what the code does with it (`sandbox.uses`), and
a world that builds one consistent set of them for a choice of candidates.

Everything lives in one small "world" so that the pieces fit together: 8 samples of 4
features, 4 classes, sizes (`dim`, `hidden`, `fan_in`...) of 4, sequences of 5 token
ids, images of 4 channels and 6x6 pixels, models from the file (or a Linear(4, 4)), an
SGD optimizer over the model it belongs to, loaders of a few batches shaped as the loop
unpacks them. The world's variant says whether float tensors require grad (and whether
they are leaves), and whether they are contiguous. `sandbox.child` searches the choices
(`Plan.coordinates`) for one the original runs with.

Imported only in the probe process.
"""

from review_copies.sandbox.worker.inputs.candidates import Cand, Slot
from review_copies.sandbox.worker.inputs.plan import Plan
from review_copies.sandbox.worker.inputs.variant import Unbuildable, Variant
from review_copies.sandbox.worker.inputs.world import World, fit_input, refresh

__all__ = ["Cand", "Plan", "Slot", "Unbuildable", "Variant", "World", "fit_input", "refresh"]
