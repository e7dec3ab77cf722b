"""From what the worker measured to one verdict with one line of evidence a reader can check.

Each recipe decides on its own (`sandbox.recipes`); this module weighs them with what the
fix did. `confirmed` when a recipe saw its signature in the original and not in the fix,
and the fix computes the same values; `refuted` when the fix changes the values, modifies
or aliases what the original left alone, or raises (the fix changes what the code
computes), or when every recipe that could tell refutes with a witness (a run reached the
finding's line with the bug's precondition present, and the bug did not happen);
`inconclusive` otherwise, saying what could not be established. A difference in a value that shares memory with what
the original modified is the bug itself, not a change of result (the worker marks those
"explained").

Runs in the reviewer's process: no torch.
"""

from __future__ import annotations

from review_copies.sandbox.protocol import Difference, Mutation, Observation, VariantRun, Watch
from review_copies.sandbox.recipes import recipe, registry
from review_copies.sandbox.recipes.base import (
    CONFIRMED,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    REFUTED,
    STAND_INS,
    VARIANT_WORDS,
    Decision,
    Runs,
    num,
    ran,
    short_error,
)

# Recipes whose bug changes the values computed from the shared tensor.
_VALUE_BUGS = frozenset(("alias", "snapshot", "input-mutation"))


def fix_break(runs: tuple[VariantRun, ...]) -> tuple[str, str] | None:
    """(kind, why) the fix is wrong where the original ran: kind is raises, result, inputs,
    mutates or aliases."""
    for run in runs:
        o, f, cmp = run.original, run.fixed, run.compare
        if not o.ok or f is None or run.variant in STAND_INS:
            continue
        words = VARIANT_WORDS.get(run.variant, f"in the {run.variant} run")
        if not f.ok:
            return "raises", f"the fix raises where the original ran ({words}): {short_error(f.error)}"
        if cmp is not None and cmp.outputs:
            return "result", "the fix changes the result: " + _diff_text(cmp.outputs[0])
        if cmp is not None and cmp.at_time:
            return "result", "with the fix the value differs when it is taken: " + _diff_text(cmp.at_time[0])
        o_mut, f_mut = _mutated(o.mutated), _mutated(f.mutated)
        for d in cmp.final_inputs if cmp is not None else ():
            if (d.path in o_mut) != (d.path in f_mut):
                continue  # the mutation the fix removes (or adds: reported below)
            if d.path in o_mut and o_mut[d.path].on_line and not f_mut[d.path].on_line:
                continue  # the fix removes the write on the finding's line; others remain
            if d.what.startswith("only in"):
                continue  # a separate object in one run (a copied module): nothing to compare
            return "inputs", "the fix changes what the inputs hold afterwards: " + _diff_text(d)
        for name in f_mut:
            if name not in o_mut:
                return "mutates", f"the fix modifies input `{name}`, which the original left alone ({words})"
        o_alias = {(a.output, a.input) for a in o.out_aliases}
        for a in f.out_aliases:
            if (a.output, a.input) not in o_alias and not any(a.input == i for _, i in o_alias):
                return "aliases", f"the fix's result `{a.output}` shares memory with input `{a.input}`, the original's did not ({words})"
    return None


def _mutated(mutations: tuple[Mutation, ...]) -> dict[str, Mutation]:
    return {m.name: m for m in mutations}


def _diff_text(d: Difference) -> str:
    if d.what == "values":
        return f"`{d.path}` differs (max abs diff {num(d.max_abs_diff)})"
    return f"`{d.path}`: {d.what}"


def _not_runnable(runs: tuple[VariantRun, ...]) -> str | None:
    """The subject never ran: it did not load, or no inputs could be built for it."""
    originals = [r.original for r in runs]
    if originals and all(not o.ok and o.stage in ("load", "inputs") for o in originals):
        return short_error(originals[0].error, 240)
    return None


def _nothing_ran(runs: tuple[VariantRun, ...]) -> str | None:
    errors = [r.original.error for r in runs if not r.original.ok]
    if runs and len(errors) == len(runs):
        return short_error(errors[0], 240)
    return None


def decide(observation: Observation, recipes: tuple[str, ...], has_fix: bool, claims: frozenset[str] = frozenset(), watch: Watch | None = None) -> Decision:
    decision = _decide(observation, recipes, has_fix, claims, watch)
    callers = observation.search.callers if observation.search is not None else ()
    if callers and decision.evidence and decision.status in (CONFIRMED, REFUTED):
        # Inputs the repository itself passes: the reader can check the claim against that call.
        where = ", ".join(f"`{c}`" for c in callers[:2])
        return Decision(decision.status, f"{decision.evidence} (inputs as {where} calls it)", decision.recipe)
    return decision


def _decide(observation: Observation, recipes: tuple[str, ...], has_fix: bool, claims: frozenset[str], watch: Watch | None) -> Decision:
    runs = tuple(r for r in observation.variants if r.variant not in STAND_INS)
    why = _not_runnable(runs)
    if why:
        return Decision(INCONCLUSIVE, f"could not run the code: {why}")
    broken = fix_break(runs) if has_fix else None
    evidence = Runs(runs, observation, has_fix, claims, watch)
    decisions = [(name, recipe(name).decide(evidence)) for name in recipes if name in registry()]
    confirmed = next(((n, d) for n, d in decisions if d.status == CONFIRMED), None)
    if broken and broken[0] in ("result", "inputs") and confirmed and confirmed[0] in _VALUE_BUGS:
        # Aliasing and stale snapshots change what is computed from the shared tensor:
        # with the fix those results differ because the bug is gone.
        return Decision(CONFIRMED, f"{confirmed[1].evidence}; results computed from it differ with the fix, as the bug implies", confirmed[0])
    if broken:
        return Decision(REFUTED, broken[1], "fix")
    if confirmed:
        return Decision(CONFIRMED, confirmed[1].evidence, confirmed[0])
    applicable = [(n, d) for n, d in decisions if d.status != NOT_APPLICABLE]
    if applicable and all(d.status == REFUTED for _, d in applicable):
        return Decision(REFUTED, applicable[0][1].evidence, applicable[0][0])
    informative = next(((n, d) for n, d in applicable if d.status == INCONCLUSIVE and d.evidence), None)
    if informative:
        return Decision(INCONCLUSIVE, informative[1].evidence, informative[0])
    failed = _nothing_ran(runs)
    if failed:
        tries = observation.search.tries if observation.search else 0
        sets = f" ({tries} input sets tried)" if tries > 1 else ""
        return Decision(INCONCLUSIVE, f"the original failed with the synthesised inputs{sets}: {failed}")
    return Decision(INCONCLUSIVE, f"none of the checks ({', '.join(recipes)}) could decide")


__all__ = ["CONFIRMED", "INCONCLUSIVE", "NOT_APPLICABLE", "REFUTED", "Decision", "decide", "fix_break", "ran"]
