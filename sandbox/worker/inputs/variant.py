"""What every part of the input synthesis shares: the world's sizes and the variant of a
run (grad or not, contiguous or not, which device)."""

from __future__ import annotations

from dataclasses import dataclass

BATCH, FEATURES, CLASSES = 8, 4, 4
SEQ, SPATIAL, HEADS, VOCAB = 5, 6, 2, 4
MAX_CANDIDATES = 6


@dataclass(frozen=True)
class Variant:
    name: str
    requires_grad: bool = False
    contiguous: bool = True
    steps: int = 3  # loader length / number of calls
    device: str = "cpu"
    leaf: bool = True  # grad tensors are leaves, or results of an op (activations)


class Unbuildable(Exception):
    """An argument the synthesiser has no value for."""
