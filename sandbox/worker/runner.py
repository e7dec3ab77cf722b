"""One run of one side of the subject with one set of inputs, under the observer: what it
modified, copied, warned, kept attached to the graph, and what the finding's line did.

Imported only in probe processes (it imports torch).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from review_copies.sandbox.protocol import BackwardRun, Changed, Mutation, OutAlias, Overwrite, Retained, Shared, Side, SideRun, WatchReport
from review_copies.sandbox.worker import inputs as synth
from review_copies.sandbox.worker.capture import Entry, capture, copy_value, graph_nodes, graph_tensors, ranges_overlap
from review_copies.sandbox.worker.load import MAX_MESSAGE, Loaded, SubjectError, error_text, load, reset_torch_state, seed
from review_copies.sandbox.worker.observe import FunctionCalls, LineWatch, Recorder, SavedTensors


@dataclass
class Options:
    watch: bool = False
    later_step: bool = False
    backward: bool = False
    hooks: bool = False
    repeat: bool = False


@dataclass
class State:
    """Live objects of one run, kept to compare the original's with the fix's."""

    outputs: list[Entry] = field(default_factory=list)
    final_inputs: list[Entry] = field(default_factory=list)
    at_time: list[Entry] = field(default_factory=list)
    grads: list[Entry] = field(default_factory=list)
    tainted: set[str] = field(default_factory=set)
    ok: bool = False


@dataclass
class Trial:
    """How far one plain call got: stage `load`, `inputs`, `call` (raised) or `ok`."""

    stage: str
    error: str = ""
    line: int = 0  # the subject's line the error came from
    names: frozenset[str] = frozenset()  # identifiers on the subject's lines of the traceback
    blame: tuple[str, ...] = ()  # slots an input-building error names

    def progress(self) -> tuple[int, int]:
        return ({"load": 0, "inputs": 1, "call": 2, "ok": 3}[self.stage], self.line)


class Runner:
    def __init__(self, side: Side, workdir: str, probe: str = "", facts: dict[str, Any] | None = None) -> None:
        self.side = side
        self.workdir = workdir
        self.probe = probe
        # The original's facts for both sides: the fix is run on the same inputs.
        self.facts = facts if facts is not None else side.facts
        self.choice: dict[str, int] = {}

    def plan(self, loaded: Loaded) -> synth.Plan:
        return synth.Plan(loaded.fn, loaded.owner, loaded.namespace, self.facts)

    def build(self, loaded: Loaded, variant: synth.Variant, choice: dict[str, int] | None = None) -> tuple[Any, dict[str, Any], dict[str, Any], synth.World]:
        """The callable, its arguments, every named input (`self` included), and the world
        that made them."""
        world = synth.World(variant, self.workdir, self.plan(loaded), dict(self.choice if choice is None else choice))
        if loaded.owner is not None:
            obj = world.build_instance()
            args = world.arguments()
            fn = loaded.fn.__get__(obj, loaded.owner)
            return fn, args, {"self": obj, **args}, world
        args = world.arguments()
        return loaded.fn, args, dict(args), world

    def trial(self, variant: synth.Variant, choice: dict[str, int]) -> Trial:
        """One plain call of the subject on the inputs of a choice (no observer)."""
        reset_torch_state()
        try:
            loaded = load(self.side)
        except SubjectError as exc:
            return Trial("load", str(exc))
        seed(0)
        try:
            fn, args, _, world = self.build(loaded, variant, choice)
        except synth.Unbuildable as exc:
            return Trial("inputs", str(exc), blame=_blamed_paths(str(exc)))
        except Exception as exc:
            return Trial("inputs", f"building inputs: {error_text(exc)}")
        seed(100)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(**args)
            except (Exception, SystemExit) as exc:
                line, names = error_site(exc, loaded.filename, self.side.fn_span, self.side.source)
                return Trial("call", error_text(exc), line=line, names=names)
            finally:
                reset_torch_state()
        del world
        return Trial("ok")

    def execute(self, variant: synth.Variant, opts: Options) -> tuple[SideRun, State]:
        state = State()
        reset_torch_state()
        try:
            loaded = load(self.side)
        except SubjectError as exc:
            return SideRun(error=str(exc), stage="load"), state
        seed(0)
        try:
            if self.probe:
                fn, args, named_inputs, world = loaded.fn, {}, {}, synth.World(variant, self.workdir)
            else:
                fn, args, named_inputs, world = self.build(loaded, variant)
        except synth.Unbuildable as exc:
            return SideRun(error=str(exc), stage="inputs", load_failures=tuple(loaded.failures[:3])), state
        except Exception as exc:
            return SideRun(error=f"building inputs: {error_text(exc)}", stage="inputs", load_failures=tuple(loaded.failures[:3])), state
        building = loaded.owner is not None and getattr(loaded.fn, "__name__", "") == "__init__" and not self.probe
        instance = named_inputs.pop("self", None) if building else None  # `__init__` itself: the object is what it builds
        pre = [e for name, value in named_inputs.items() for e in capture(value, name, attributes=name == "self")]
        base_nodes = graph_nodes([e.ref for e in pre if isinstance(e.ref, torch.Tensor)])
        recorder = Recorder()
        copies = FunctionCalls(recorder)
        spec = self.side.watch
        watch = LineWatch(loaded.filename, loaded.code, self.side.fn_span, spec.span, list(spec.names), spec.kind, recorder, pre, spec.sources)
        saved = SavedTensors(recorder) if opts.hooks else contextlib.nullcontext()
        results: list[Any] = []
        made: list[torch.nn.Module] = []
        ok, error, stage, error_type, where = False, None, None, None, None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with watch, saved, copies, recorder:
                    if self.probe:
                        results = self._run_probe(loaded, recorder, pre, named_inputs)
                    else:
                        for k in range(variant.steps if opts.repeat else 1):
                            seed(100 + k)
                            out = fn(**(args if k == 0 else synth.refresh(args, world)))
                            if building:
                                out = instance
                            elif opts.backward and _fresh_module(out, named_inputs):
                                # A factory of a model: autograd checks need it run forward.
                                made.append(out)
                                out = out(synth.fit_input(out, world))
                            results.append(out)
                ok = True
            except (Exception, SystemExit) as exc:
                error, stage, error_type = error_text(exc), "call", type(exc).__name__
                where = _where(exc, loaded.filename)
        reset_torch_state()
        warned = tuple(sorted({f"{w.category.__name__}: {' '.join(str(w.message).split())}"[:MAX_MESSAGE] for w in caught}))
        result = results[-1] if len(results) == 1 else results
        # Repeated calls: the harness keeps every call's result; what the code keeps is
        # the last result and the state.
        last = results[-1] if results else None
        outputs = capture(result, "result") if ok else []
        mutated = _mutations(pre, recorder, spec.span)
        mutated_ranges = [e.where for e in pre if e.path in {m.name for m in mutated}]
        state.tainted = {o.path for o in outputs if any(ranges_overlap(o.where, r) for r in mutated_ranges)}
        overwritten: tuple[Overwrite, ...] = ()
        retained = None
        if opts.hooks and isinstance(saved, SavedTensors):
            overwritten = tuple(saved.overwritten()[:8])
            retained = _retained(last if opts.repeat else result, named_inputs, base_nodes, saved)
        backward = None
        if opts.backward and ok:
            backward, state.grads = _backward(outputs, pre + [e for m in made[:1] for e in capture(m, "model")])
        watched, changed_ranges, at_time = _watch_report(watch, recorder, copies, pre, opts.watch and opts.later_step)
        if opts.watch:
            # What the watched names held when the line ran: compared with the fix's.
            state.at_time = at_time
            state.tainted |= {o.path for o in outputs if any(ranges_overlap(o.where, r) for r in changed_ranges)}
        state.outputs, state.ok = outputs, ok
        state.final_inputs = [Entry(e.path, e.ref, e.where, e.version, copy_value(e.ref)) for e in pre]
        run = SideRun(
            ok=ok, error=error, stage=stage, error_type=error_type, where=where, load_failures=tuple(loaded.failures[:3]), warnings=warned,
            mutated=mutated, copy_bytes=recorder.copy_bytes, copy_ops=dict(recorder.copy_ops), gather_bytes=recorder.gather_bytes,
            graph_copies=copies.count, out_aliases=tuple(OutAlias(o.path, i.path) for o in outputs for i in pre if ranges_overlap(o.where, i.where))[:12],
            result=_shape_of(outputs), saved_overwritten=overwritten, retained=retained, backward=backward, watch=watched,
        )
        return run, state

    def _run_probe(self, loaded: Loaded, recorder: Recorder, pre: list[Entry], named: dict[str, Any]) -> list[Any]:
        """The LLM's probe: it calls the subject by name. A spy takes the arguments of the
        first call as the inputs to watch, and keeps what each call returned."""
        results: list[Any] = []
        name = self.side.target[-1]
        signature = inspect.signature(loaded.fn)

        def spy(*args: Any, **kwargs: Any) -> Any:
            if not results:
                recorder.paused = True
                try:
                    bound = signature.bind(*args, **kwargs)
                    named.update(bound.arguments)
                    pre.extend(e for arg, value in bound.arguments.items() for e in capture(value, arg, attributes=arg == "self"))
                finally:
                    recorder.paused = False
            out = loaded.fn(*args, **kwargs)
            results.append(out)
            return out

        if loaded.owner is None:
            loaded.namespace[name] = spy
        else:
            setattr(loaded.owner, name, spy)
        # The probe may use what the subject itself does not import.
        for alias, module in (("torch", torch), ("np", np), ("nn", torch.nn), ("F", torch.nn.functional)):
            loaded.namespace.setdefault(alias, module)
        exec(compile(self.probe, "<probe>", "exec"), loaded.namespace)
        if not results:
            raise RuntimeError(f"the probe never called `{name}`")
        return results


# ------------------------------------------------------------- measurements


def _mutations(pre: list[Entry], recorder: Recorder, span: tuple[int, int] | None = None) -> tuple[Mutation, ...]:
    mutated = []
    for e in pre:
        if not isinstance(e.ref, (torch.Tensor, np.ndarray)):
            continue
        version = e.ref._version if isinstance(e.ref, torch.Tensor) and e.version is not None else None
        change = e.current_change()
        writes = recorder.writes_to(e.where)
        if (version is not None and version != e.version) or writes or (change is not None and change > 0):
            lines = sorted({w.line for w in writes if w.line})
            on_line = bool(span and any(span[0] <= n <= span[1] for n in lines))
            mutated.append(Mutation(e.path, e.version, version, change, tuple(sorted({w.op for w in writes})[:4]), tuple(lines[:8]), on_line))
    return tuple(mutated[:16])


def _weights(t: torch.Tensor) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(1234)
    return torch.rand(t.shape, generator=g).to(device=t.device, dtype=t.dtype if t.is_floating_point() else torch.float32) + 0.5


def weighted_loss(outputs: list[Entry]) -> torch.Tensor | None:
    """A fixed weighted sum of the outputs that require grad: what backward starts from."""
    terms = [(e.ref.float() * _weights(e.ref.float())).sum() for e in outputs if isinstance(e.ref, torch.Tensor) and e.ref.requires_grad]
    return torch.stack(terms).sum() if terms else None


def grad_targets(pre: list[Entry]) -> list[tuple[str, torch.Tensor]]:
    return [(e.path, e.ref) for e in pre if isinstance(e.ref, torch.Tensor) and e.ref.requires_grad and e.ref.is_leaf]


def _backward(outputs: list[Entry], pre: list[Entry]) -> tuple[BackwardRun, list[Entry]]:
    loss = weighted_loss(outputs)
    targets = grad_targets(pre)
    if loss is None or not targets:
        return BackwardRun(tried=False), []
    try:
        grads = torch.autograd.grad(loss, [t for _, t in targets], allow_unused=True)
    except RuntimeError as exc:
        return BackwardRun(tried=True, error=error_text(exc)), []
    entries = [Entry(f"grad of {p}", g, None, None, g.detach().cpu().clone()) for (p, _), g in zip(targets, grads) if g is not None]
    return BackwardRun(tried=True), entries


def _retained(result: Any, named_inputs: dict[str, Any], base: set[int], saved: SavedTensors) -> Retained:
    held = graph_tensors(result, "result")
    for name, value in named_inputs.items():
        if not isinstance(value, torch.Tensor):
            held += graph_tensors(value, name)
        if isinstance(value, torch.nn.Module):
            # State a module keeps outside its parameters and buffers (`self.maps = []`).
            for prefix, m in value.named_modules():
                for k, v in vars(m).items():
                    if not k.startswith("_") and not isinstance(v, torch.nn.Module):
                        held += graph_tensors(v, ".".join(x for x in (name, prefix, k) if x))
    nodes = graph_nodes([t for _, t in held]) - base
    state_nodes = graph_nodes([t for p, t in held if not p.startswith("result")]) - base
    return Retained(len(nodes), len(state_nodes), saved.alive_bytes(), tuple(sorted({p.split("[")[0] for p, _ in held})[:6]))


def _bump(entries: list[Entry]) -> int:
    """A later in-place step on every input tensor (what training does next); how many it changed."""
    changed = 0
    with torch.no_grad():
        for e in entries:
            t = e.ref
            try:
                if isinstance(t, torch.Tensor):
                    if t.dtype == torch.bool:
                        t.logical_not_()
                    elif t.is_floating_point() or t.is_complex():
                        t.add_(0.5)
                    else:
                        t.add_(1)
                    changed += 1
                elif isinstance(t, np.ndarray) and t.flags.writeable:
                    t += 1
                    changed += 1
            except RuntimeError:
                continue
    return changed


def _watch_report(watch: LineWatch, recorder: Recorder, calls: FunctionCalls, pre: list[Entry], later: bool) -> tuple[WatchReport, list[Any], list[Entry]]:
    changed: dict[str, Changed] = {}
    sources: dict[str, Changed] = {}
    ranges: list[Any] = []

    def look(when: str) -> None:
        for snap in watch.snapshots:
            if snap.source:
                for e in snap.entries:
                    change = e.current_change()
                    if change is not None and change > 0 and e.path not in sources:
                        sources[e.path] = Changed(e.path, change, when)
                continue
            for e in snap.entries:
                change = e.current_change()
                if change is None or change <= 1e-6 * max(1.0, float(abs(e.value).max()) if isinstance(e.value, torch.Tensor) and e.value.numel() else 1.0):
                    continue
                if e.path in changed:
                    continue
                writes = recorder.writes_to(e.where, after=snap.step)
                detail = when
                if when == "during the call" and writes:
                    detail = f"during the call, written by {writes[0].op}" + (f" at line {writes[0].line}" if writes[0].line else "")
                changed[e.path] = Changed(e.path, change, detail)
                ranges.append(e.where)

    look("during the call")
    bumped = 0
    if later:
        bumped = _bump(pre)
        look("after a later in-place update of the inputs")
    shares = sorted({(p, other) for snap in watch.snapshots if not snap.source for p, other in snap.shares})
    taken = [s for s in watch.snapshots if not s.source]
    at_time = [Entry(e.path, e.ref, e.where, e.version, e.value) for e in taken[0].entries] if taken else []
    report = WatchReport(
        ran=watch.ran,
        changed=tuple(changed.values())[:8],
        shares=tuple(Shared(p, o) for p, o in shares)[:8],
        line_hits=tuple(tuple(hit) for hit in watch.line_hits[:4]),
        writes=recorder.span_writes,
        copy_bytes=recorder.span_copy_bytes,
        attached=watch.attached,
        spent=(watch.spent[0], watch.spent[1]) if watch.spent else (0, 0),
        calls=tuple(calls.line_calls),
        bumped=bumped,
        sources_changed=tuple(sources.values())[:4],
    )
    return report, ranges, at_time


# ----------------------------------------------------------------- helpers


def _fresh_module(out: Any, inputs: dict[str, Any]) -> bool:
    """A module the call made (none of its parameters belongs to an input)."""
    if not isinstance(out, torch.nn.Module):
        return False
    owned = {id(p) for v in inputs.values() if isinstance(v, torch.nn.Module) for p in v.parameters()}
    return any(True for _ in out.parameters()) and not any(id(p) in owned for p in out.parameters())


def _shape_of(outputs: list[Entry]) -> str:
    if not outputs:
        return "nothing"
    return f"{len(outputs)} value(s), first {outputs[0].path}: {type(outputs[0].ref).__name__}"


def _where(exc: BaseException, filename: str) -> int | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == filename:
            return frame.lineno
    return None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def error_site(exc: BaseException, filename: str, span: tuple[int, int], source: str) -> tuple[int, frozenset[str]]:
    """The subject function's line the error came from, and the identifiers on every line
    of the subject's file in the traceback (which inputs the error may be about)."""
    lines = source.splitlines()
    line, names = 0, set()
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename != filename or not frame.lineno:
            continue
        if span[0] <= frame.lineno <= span[1]:
            line = frame.lineno
        if 0 < frame.lineno <= len(lines):
            names |= set(_IDENT.findall(lines[frame.lineno - 1]))
    return line, frozenset(names)


def _blamed_paths(message: str) -> tuple[str, ...]:
    found = re.findall(r"could not build `([^`]+)`", message)
    if "could not construct" in message:
        found.append("init:")
    return tuple(found)
