"""One request in the probe process: find inputs the original runs with, run the original
and the fix on them in a few variants (plain, inputs that require grad, non-contiguous,
the meta device standing in for a GPU), compare them, and take the measurements the
request's recipes ask for. The answer is an `Observation`: facts, never a verdict.

Imported only in probe processes (it imports torch).
"""

from __future__ import annotations

import gc
import re
from dataclasses import replace

import torch

from review_copies.sandbox.protocol import (
    Comparison,
    GradCheck,
    Observation,
    Overwrite,
    ProbeRequest,
    Retained,
    SideRun,
    StepsRun,
    VariantRun,
)
from review_copies.sandbox.recipes import needs_for, recipe
from review_copies.sandbox.recipes.leaf_inplace import LEAF
from review_copies.sandbox.worker import inputs as synth
from review_copies.sandbox.worker.capture import compare
from review_copies.sandbox.worker.gradcheck import gradcheck
from review_copies.sandbox.worker.inputs.callers import role
from review_copies.sandbox.worker.load import SubjectError, error_text, load
from review_copies.sandbox.worker.runner import Options, Runner, State
from review_copies.sandbox.worker.search import search


def run(request: ProbeRequest) -> Observation:
    torch.set_num_threads(1)
    device = request.device
    needs = needs_for(request.recipes)
    subject = request.subject
    original = Runner(subject.original, request.workdir, request.probe)
    fixed = Runner(subject.fixed, request.workdir, request.probe, facts=original.facts) if subject.fixed is not None else None
    opts = Options(watch="watch" in needs, later_step="later_step" in needs, backward="backward" in needs)
    found = None
    if not request.probe:
        found = search(original, fixed, request.recipes, device)
        original.choice = found.choice
        if fixed is not None:
            fixed.choice = found.choice
    report = found.report() if found is not None else None
    first = original.execute(synth.Variant("plain", device=device), opts)
    if _exhausted(first[0]):
        return Observation(device, (VariantRun("plain", first[0]),), report)
    variants = [synth.Variant("plain", device=device), synth.Variant("grad", requires_grad=True, device=device)]
    if "strided" in needs:
        variants.append(synth.Variant("strided", contiguous=False, device=device))
    if "raises" in request.recipes and device == "cpu" and not request.probe and _takes(original, "device"):
        # The code runs on a device it is given: without a GPU, the meta device stands in
        # for one (conversions to NumPy fail there as they do on a GPU).
        variants.append(synth.Variant("device", device="meta"))
    runs = []
    for variant in variants:
        o_run, o_state = first if variant.name == "plain" else original.execute(variant, opts)
        if variant.name == "grad" and "leaf-inplace" not in request.recipes and re.search(LEAF, o_run.error or ""):
            # An in-place write on an input that is a leaf: a caller passes activations.
            variant = synth.Variant("grad", requires_grad=True, device=device, leaf=False)
            o_run, o_state = original.execute(variant, opts)
            o_run = _with_inputs(o_run, "activations (not leaves) that require grad")
        if fixed is None:
            runs.append(VariantRun(variant.name, o_run))
        else:
            f_run, f_state = fixed.execute(variant, opts)
            runs.append(VariantRun(variant.name, o_run, f_run, _compared(o_state, f_state, strict="strict" in needs)))
        if original.probe:
            break
    observation = Observation(device, tuple(runs), report)
    measure = _Measure(original, fixed, device)
    extra: dict[str, object] = {}
    for name in request.recipes:
        extra.update(recipe(name).observe(measure))
    return replace(observation, **extra)


class _Measure:
    """What recipes may ask the worker to measure beyond the variant runs."""

    def __init__(self, original: Runner, fixed: Runner | None, device: str) -> None:
        self.sides = {"original": original, "fixed": fixed}
        self.has_fix = fixed is not None
        self.device = device
        self._saved: dict[str, tuple[Overwrite, ...]] = {}

    def _runner(self, side: str) -> Runner:
        runner = self.sides[side]
        assert runner is not None, f"no {side} side to measure"
        return runner

    def steps(self, side: str, steps: int) -> StepsRun:
        runner = self._runner(side)
        variant = synth.Variant(f"steps{steps}", requires_grad=True, steps=steps, device=self.device)
        # A subject that iterates a loader takes its steps in one call.
        options = Options(hooks=True, repeat=not _takes(runner, "loader", chosen=True))
        run, _ = runner.execute(variant, options)
        if re.search(LEAF, run.error or ""):
            # An in-place accumulation into an input that is a leaf: a caller passes activations.
            run, _ = runner.execute(synth.Variant(f"steps{steps}", requires_grad=True, steps=steps, device=self.device, leaf=False), options)
        gc.collect()
        return StepsRun(steps, run.ok, run.error, run.retained or Retained(), run.watch)

    def gradcheck(self, side: str) -> GradCheck:
        return gradcheck(self._runner(side), synth.Variant("grad", requires_grad=True, device=self.device))

    def saved_overwrites(self, side: str) -> tuple[Overwrite, ...]:
        # Two recipes may ask (backward, silent-grad): the run is made once per side.
        if side not in self._saved:
            run, _ = self._runner(side).execute(synth.Variant("grad", requires_grad=True, device=self.device), Options(hooks=True))
            self._saved[side] = run.saved_overwritten
        return self._saved[side]


def _with_inputs(run: SideRun, words: str) -> SideRun:
    return replace(run, inputs=words)


def _exhausted(run: SideRun) -> bool:
    """The subject ran out of memory: running it again in more variants only burns the limits."""
    error = run.error or ""
    return run.error_type == "MemoryError" or "can't allocate memory" in error or "out of memory" in error


def _takes(runner: Runner, kind: str, chosen: bool = False) -> bool:
    """Whether an input of the subject is of this candidate kind (a device, a loader): the
    first candidate of any slot, or with `chosen`, the candidate the search chose for a
    parameter."""
    try:
        plan = runner.plan(load(runner.side))
    except (SubjectError, synth.Unbuildable, TypeError, ValueError):
        return False
    if not chosen:
        return any(s.cands and role(s.cands[0]) == kind for s in plan.slots.values())
    for name in plan.params:
        slot = plan.slots[name]
        if slot.cands and role(slot.cands[min(runner.choice.get(name, 0), len(slot.cands) - 1)]) == kind:
            return True
    return False


def _compared(o: State, f: State, strict: bool) -> Comparison:
    try:
        if not (o.ok and f.ok):
            return Comparison(comparable=False)
        outputs = compare(o.outputs, f.outputs, strict)
        return Comparison(
            comparable=True,
            outputs=tuple(d for d in outputs if not _tainted(d.path, o.tainted))[:6],
            explained=tuple(d for d in outputs if _tainted(d.path, o.tainted))[:6],
            final_inputs=tuple(compare(o.final_inputs, f.final_inputs, False))[:6],
            at_time=tuple(compare(o.at_time, f.at_time, False))[:6] if o.at_time and f.at_time else (),
            grads=tuple(compare(o.grads, f.grads, False))[:6] if o.grads and f.grads else (),
        )
    except Exception as exc:  # values the observer cannot compare: say so, do not fail the probe
        return Comparison(comparable=False, error=error_text(exc))


def _tainted(path: str, tainted: set[str]) -> bool:
    return any(path == t or path.startswith(t + "[") or path.startswith(t + ".") or t.startswith(path + "[") for t in tainted)
