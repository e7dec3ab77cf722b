"""What every recipe is: the measurements it asks the worker for, how it decides, and the
words its evidence is written with. No torch: the reviewer's process reads this."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from review_copies.sandbox.protocol import GradCheck, Observation, Overwrite, SideRun, StepsRun, VariantRun

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN = "confirmed", "refuted", "inconclusive", "not-run"
# A recipe that has nothing to say about these runs (it needs runs it did not get).
NOT_APPLICABLE = "n/a"

VARIANT_WORDS = {
    "plain": "with plain inputs", "grad": "with inputs that require grad", "strided": "with non-contiguous inputs",
    "device": "on the meta device, standing in for a GPU",
}
# Runs whose tensors hold no data (the meta device): they can show an error, never judge a fix.
STAND_INS = frozenset(("device",))


@dataclass(frozen=True)
class Decision:
    status: str
    evidence: str
    recipe: str = ""


class Measure(Protocol):
    """What the worker can measure for a recipe beyond the runs every request gets
    (implemented in `worker.check`)."""

    has_fix: bool

    def steps(self, side: str, steps: int) -> StepsRun:
        """`side` ("original" or "fixed") run for `steps` training steps, with what it keeps."""

    def gradcheck(self, side: str) -> GradCheck:
        """`side`'s gradients against finite differences."""

    def saved_overwrites(self, side: str) -> tuple[Overwrite, ...]:
        """Tensors autograd saved during `side`'s run that were written afterwards."""


class Recipe:
    """One signature of a copy problem the sandbox can look for."""

    name: ClassVar[str]
    # What the worker must measure: watch (the finding's line), later_step (an in-place step
    # on the inputs after the call), strided (non-contiguous inputs), strict (dtype and
    # requires_grad count as differences), backward, gradcheck, saved, retention.
    needs: ClassVar[frozenset[str]] = frozenset()
    # The error that is the bug itself: the input search keeps inputs that reach it.
    signature: ClassVar[str | None] = None

    def observe(self, measure: Measure) -> Mapping[str, object]:
        """Measurements of the worker's beyond the runs (fields of `Observation`)."""
        return {}

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        raise NotImplementedError


# ------------------------------------------------------------------ wording


def ran(side: SideRun | None) -> bool:
    return side is not None and side.ok


def num(x: float | None) -> str:
    if x is None:
        return "?"
    if math.isinf(x):
        return "inf"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def short_error(text: str | None, limit: int = 170) -> str:
    text = re.sub(r"\s*Hint: .*$", "", text or "", flags=re.S)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def raised(side: SideRun | None, pattern: str | None = None) -> str | None:
    """The error the call raised (matching `pattern`), if it raised one."""
    if side is None or side.ok or side.stage != "call":
        return None
    error = side.error or ""
    if pattern and not re.search(pattern, error):
        return None
    return error


def raises_with(runs: tuple[VariantRun, ...], has_fix: bool, pattern: str | None, what: str) -> Decision:
    """Confirmed when the original raised (matching `pattern`) and the fix ran."""
    ran_clean, both = [], None
    for run in runs:
        o, f = run.original, run.fixed
        error = raised(o, pattern)
        words = VARIANT_WORDS.get(run.variant, "")
        if error is None:
            if o.ok:
                ran_clean.append(run.variant)
            continue
        text = f"the original raised {short_error(error)} ({words})"
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if ran(f):
            return Decision(CONFIRMED, text + "; the fix ran")
        both = text + f"; the fix raised too: {short_error(f.error if f else None)}"
    if both:
        return Decision(INCONCLUSIVE, both)
    if ran_clean and ("grad" in ran_clean or pattern is None):
        return Decision(REFUTED, f"{what} ran without error " + " and ".join(VARIANT_WORDS[v] for v in ran_clean if v in VARIANT_WORDS))
    return Decision(NOT_APPLICABLE, "")
