"""What every recipe is: the measurements it asks the worker for, how it decides, and the
words its evidence is written with. No torch: the reviewer's process reads this."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from review_copies.sandbox.protocol import GradCheck, Observation, Overwrite, SideRun, StepsRun, VariantRun, Watch

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


@dataclass(frozen=True)
class Runs:
    """What a recipe decides from: the runs (stand-ins for a GPU left out), everything else
    the worker measured, whether a fix was run, and what the finding claims."""

    variants: tuple[VariantRun, ...]
    observation: Observation
    has_fix: bool
    # "grad": a tensor requires grad; "gpu": it lives on a GPU (the finding says so).
    claims: frozenset[str] = frozenset()
    # The finding's statement in the original: its lines, what it binds, whether it loops.
    watch: Watch | None = None

    def line_ran(self) -> bool:
        return any(r.original.watch is not None and r.original.watch.ran > 0 for r in self.variants if r.original.ok)

    def inputs(self) -> str:
        """The inputs the runs used, in a few words, for evidence that says what was tried."""
        search = self.observation.search
        if search is None or not search.inputs:
            return ""
        shown = [f"{name} {words}" for name, words in list(search.inputs.items())[:4]]
        more = len(search.inputs) - len(shown)
        return "; ".join(shown) + (f"; {more} more" if more > 0 else "")

    def tried(self, text: str) -> str:
        """`text`, with the inputs that were tried (inconclusive evidence says what could not
        be established, and with what)."""
        inputs = self.inputs()
        return f"{text} (inputs: {inputs})" if inputs else text

    def not_established(self, what: str) -> Decision:
        """The runs never set up the bug's precondition: they say nothing either way."""
        if not any(r.original.ok for r in self.variants):
            return Decision(INCONCLUSIVE, "")  # the verdict says why nothing ran
        if not self.line_ran():
            return Decision(INCONCLUSIVE, self.tried("the finding's line never ran"))
        return Decision(INCONCLUSIVE, self.tried(what))


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

    def decide(self, runs: Runs) -> Decision:
        """Confirmed when the original shows the bug and the fix does not; refuted only when
        a run reached the finding's line with the bug's precondition present and the bug
        did not happen (the evidence names the precondition); inconclusive otherwise, saying
        what could not be established."""
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


def raised_in(variants: tuple[VariantRun, ...], has_fix: bool, pattern: str | None) -> Decision | None:
    """Confirmed when the original raised (matching `pattern`) and the fix ran; inconclusive
    when both raised; None when the original never raised."""
    both = None
    for run in variants:
        o, f = run.original, run.fixed
        error = raised(o, pattern)
        if error is None:
            continue
        text = f"the original raised {short_error(error)} ({VARIANT_WORDS.get(run.variant, '')})"
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if ran(f):
            return Decision(CONFIRMED, text + "; the fix ran")
        both = text + f"; the fix raised too: {short_error(f.error if f else None)}"
    return Decision(INCONCLUSIVE, both) if both else None
