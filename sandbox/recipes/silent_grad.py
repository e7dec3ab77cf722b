"""`silent-grad`: autograd's gradients disagree with finite differences, or a tensor saved
for backward was overwritten without a version bump (so backward reads the new values
without complaint).

Refuted only with a witness: a tensor the finding's line wrote had been saved for
backward, and autograd's gradients agree with finite differences."""

from __future__ import annotations

from collections.abc import Mapping

from review_copies.sandbox.protocol import GradChecks, SavedChecks
from review_copies.sandbox.recipes.backward import saved_on_line
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Measure, Recipe, Runs, num


class SilentGradRecipe(Recipe):
    name = "silent-grad"
    needs = frozenset({"backward", "gradcheck", "saved"})

    def observe(self, measure: Measure) -> Mapping[str, object]:
        checks = GradChecks(measure.gradcheck("original"), measure.gradcheck("fixed") if measure.has_fix else None)
        saved = SavedChecks(measure.saved_overwrites("original"), measure.saved_overwrites("fixed") if measure.has_fix else None)
        return {"gradcheck": checks, "saved": saved}

    def decide(self, runs: Runs) -> Decision:
        checks, saved = runs.observation.gradcheck, runs.observation.saved
        o_check = checks.original if checks else None
        f_check = checks.fixed if checks else None
        silent = [s for s in (saved.original if saved else ()) if s.silent]
        f_silent = [s for s in (saved.fixed or () if saved else ()) if s.silent]
        if o_check is not None and o_check.tried and not o_check.agree:
            text = f"gradients are silently wrong: {o_check.worst}"
            if not runs.has_fix:
                return Decision(CONFIRMED, text + "; no fix is offered to compare")
            if f_check is not None and f_check.tried and f_check.agree:
                return Decision(CONFIRMED, text + "; with the fix autograd agrees with finite differences")
            return Decision(INCONCLUSIVE, text + "; the fix's gradients could not be checked or are wrong too")
        if silent:
            s = silent[0]
            at = f" at line {s.line}" if s.line else ""
            text = f"a tensor saved for backward by {s.saved_by} was overwritten by {s.written_by}{at} without a version bump, so backward reads the new values"
            if not runs.has_fix:
                return Decision(CONFIRMED, text + "; no fix is offered to compare")
            if not f_silent and saved is not None and saved.fixed is not None:
                return Decision(CONFIRMED, text + "; with the fix nothing saved is overwritten")
            return Decision(INCONCLUSIVE, text + "; the fix does the same")
        written = saved_on_line(runs)
        if written is not None and o_check is not None and o_check.tried and o_check.agree:
            return Decision(
                REFUTED,
                f"the tensor written on the finding's line had been saved for backward (by {written.saved_by}), and autograd's gradients "
                f"agree with finite differences (max diff {num(o_check.max_diff)})",
            )
        return runs.not_established("no tensor the finding's line wrote had been saved for backward, with inputs that require grad")
