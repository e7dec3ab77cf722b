"""The probe process's work: load the subject's original and fixed versions, run each
under the observer on the same inputs, in a few variants, and say what was seen.

The answer is plain JSON (facts and differences); `sandbox.verdict` turns it into a
verdict in the reviewer's process. Imported only in probe processes (it imports torch).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import random
import re
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from review_copies.sandbox.recipes import needs_for
from review_copies.sandbox.worker import inputs as synth
from review_copies.sandbox.worker.observe import (
    CopyNodes,
    Entry,
    LineWatch,
    Recorder,
    SavedTensors,
    capture,
    compare,
    graph_nodes,
    graph_tensors,
    overlaps,
)

MAX_MESSAGE = 300


def _text(exc: BaseException) -> str:
    first = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {first}"[:MAX_MESSAGE]


def seed(n: int) -> None:
    # Not torch.manual_seed: without CUDA initialised it queues a lazy CUDA seed call with
    # a formatted stack each time (over 1 ms); the CPU generator is what the subject uses.
    torch.default_generator.manual_seed(n)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(n)
    np.random.seed(n)
    random.seed(n)


def reset_torch_state() -> None:
    """Undo global switches a subject may leave behind (grad mode, default dtype)."""
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)


# ------------------------------------------------------------------- loading


class SubjectError(Exception):
    pass


@dataclass
class Loaded:
    namespace: dict[str, Any]
    fn: Any
    owner: type | None
    code: Any
    failures: list[str] = field(default_factory=list)


def load(side: dict[str, Any]) -> Loaded:
    """Run the kept top-level statements one by one (a failing import only loses its names)."""
    filename = f"<subject {side['filename']}>"
    try:
        tree = ast.parse(side["source"], filename=filename)
    except SyntaxError as exc:
        raise SubjectError(f"the subject does not compile: {exc.msg} (line {exc.lineno})") from None
    namespace: dict[str, Any] = {"__name__": "review_copies_subject", "__file__": filename, "__builtins__": __builtins__}
    failures = []
    for stmt in tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec")
        try:
            exec(code, namespace)
        except Exception as exc:
            failures.append(f"line {stmt.lineno}: {_text(exc)}")
    target = side["target"]
    obj: Any = namespace.get(target[0])
    owner = None
    for part in target[1:]:
        owner = obj if isinstance(obj, type) else owner
        obj = inspect.getattr_static(obj, part, None) if obj is not None else None
    if obj is None:
        why = f" ({failures[0]})" if failures else ""
        raise SubjectError(f"`{'.'.join(target)}` is not defined after loading the file{why}")
    fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    # A decorated function (`@torch.no_grad()`) is called as decorated, but the tracer
    # watches the code written in the file.
    code = getattr(_unwrap(fn), "__code__", None)
    if code is None:
        raise SubjectError(f"`{'.'.join(target)}` is not a Python function")
    if isinstance(obj, staticmethod):
        owner = None
        fn = obj.__func__
    elif isinstance(obj, classmethod):
        fn = obj.__get__(None, owner)
        owner = None
    return Loaded(namespace, fn, owner, code, failures)


def _unwrap(fn: Any) -> Any:
    try:
        return inspect.unwrap(fn)
    except ValueError:
        return fn


# ------------------------------------------------------------------- one run


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


def _bump(entries: list[Entry]) -> None:
    """A later in-place step on every input tensor (what training does next)."""
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
                elif isinstance(t, np.ndarray) and t.flags.writeable:
                    t += 1
            except RuntimeError:
                continue


def _weights(t: torch.Tensor) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(1234)
    return torch.rand(t.shape, generator=g).to(device=t.device, dtype=t.dtype if t.is_floating_point() else torch.float32) + 0.5


def _scalar(outputs: list[Entry]) -> torch.Tensor | None:
    terms = [(e.ref.float() * _weights(e.ref.float())).sum() for e in outputs if isinstance(e.ref, torch.Tensor) and e.ref.requires_grad]
    return torch.stack(terms).sum() if terms else None


def _grad_targets(pre: list[Entry]) -> list[tuple[str, torch.Tensor]]:
    return [(e.path, e.ref) for e in pre if isinstance(e.ref, torch.Tensor) and e.ref.requires_grad and e.ref.is_leaf]


class Runner:
    def __init__(self, side: dict[str, Any], workdir: str, probe: str = "", hints: dict[str, Any] | None = None) -> None:
        self.side = side
        self.workdir = workdir
        self.probe = probe
        # The original's hints for both sides: the fix is run on the same inputs.
        self.hints = hints if hints is not None else (side.get("inputs") or {})
        self.choice: dict[str, int] = {}

    def plan(self, loaded: Loaded) -> synth.Plan:
        return synth.Plan(loaded.fn, loaded.owner, loaded.namespace, self.hints)

    def _build(self, loaded: Loaded, variant: synth.Variant, choice: dict[str, int] | None = None) -> tuple[Any, dict[str, Any], dict[str, Any], synth.World]:
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
            fn, args, _, world = self._build(loaded, variant, choice)
        except synth.Unbuildable as exc:
            return Trial("inputs", str(exc), blame=_blamed_paths(str(exc)))
        except Exception as exc:
            return Trial("inputs", f"building inputs: {_text(exc)}")
        seed(100)
        filename = loaded.namespace["__file__"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(**args)
            except (Exception, SystemExit) as exc:
                line, names = _error_site(exc, filename, tuple(self.side["fn_span"]), self.side["source"])
                return Trial("call", _text(exc), line=line, names=names)
            finally:
                reset_torch_state()
        del world
        return Trial("ok")

    def execute(self, variant: synth.Variant, opts: Options) -> tuple[dict[str, Any], State]:
        obs: dict[str, Any] = {"ok": False}
        state = State()
        reset_torch_state()
        try:
            loaded = load(self.side)
        except SubjectError as exc:
            obs.update(error=str(exc), stage="load")
            return obs, state
        if loaded.failures:
            obs["load_failures"] = loaded.failures[:3]
        seed(0)
        try:
            if self.probe:
                fn, args, named_inputs, world = loaded.fn, {}, {}, synth.World(variant, self.workdir)
            else:
                fn, args, named_inputs, world = self._build(loaded, variant)
        except synth.Unbuildable as exc:
            obs.update(error=str(exc), stage="inputs")
            return obs, state
        except Exception as exc:
            obs.update(error=f"building inputs: {_text(exc)}", stage="inputs")
            return obs, state
        building = loaded.owner is not None and getattr(loaded.fn, "__name__", "") == "__init__" and not self.probe
        if building:
            # `__init__` itself: the object is what it builds, not an input.
            instance = named_inputs.pop("self", None)
        pre = [e for name, value in named_inputs.items() for e in capture(value, name, attributes=name == "self")]
        base_nodes = graph_nodes([e.ref for e in pre if isinstance(e.ref, torch.Tensor)])
        recorder = Recorder()
        copies = CopyNodes()
        watch_spec = self.side.get("watch") or {}
        watch = LineWatch(
            loaded.namespace["__file__"], loaded.code, tuple(self.side["fn_span"]), tuple(watch_spec["span"]) if watch_spec.get("span") else None,
            list(watch_spec.get("names", [])), watch_spec.get("kind", "assign"), recorder, pre,
        )
        saved = SavedTensors(recorder) if opts.hooks else contextlib.nullcontext()
        calls = variant.steps if opts.repeat else 1
        results: list[Any] = []
        made: list[torch.nn.Module] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with watch, saved, copies, recorder:
                    if self.probe:
                        results = self._run_probe(loaded, recorder, pre, named_inputs)
                    else:
                        for k in range(calls):
                            seed(100 + k)
                            out = fn(**(args if k == 0 else synth.refresh(args, world)))
                            if building:
                                out = instance
                            elif opts.backward and _fresh_module(out, named_inputs):
                                # A factory of a model: autograd checks need it run forward.
                                made.append(out)
                                out = out(synth.fit_input(out, world))
                            results.append(out)
                obs["ok"] = True
            except (Exception, SystemExit) as exc:
                obs.update(error=_text(exc), stage="call", error_type=type(exc).__name__)
                obs["where"] = _where(exc, loaded.namespace["__file__"])
        reset_torch_state()
        obs["warnings"] = sorted({f"{w.category.__name__}: {' '.join(str(w.message).split())}"[:MAX_MESSAGE] for w in caught})
        result = results[-1] if len(results) == 1 else results
        # Repeated calls: the harness keeps every call's result; what the code keeps is
        # the last result and the state.
        last = results[-1] if results else None
        outputs = capture(result, "result") if obs["ok"] else []
        obs.update(self._mutations(pre, recorder, tuple(watch_spec["span"]) if watch_spec.get("span") else None))
        obs["copy_bytes"] = recorder.copy_bytes
        obs["copy_ops"] = dict(recorder.copy_ops)
        obs["gather_bytes"] = recorder.gather_bytes
        obs["graph_copies"] = copies.count
        obs["out_aliases"] = [{"output": o.path, "input": i.path} for o in outputs for i in pre if overlaps(o.where, i.where)][:12]
        obs["result"] = _shape_of(outputs)
        mutated_ranges = [e.where for e in pre if e.path in {m["name"] for m in obs["mutated"]}]
        state.tainted = {o.path for o in outputs if any(overlaps(o.where, r) for r in mutated_ranges)}
        if opts.hooks and isinstance(saved, SavedTensors):
            obs["saved_overwritten"] = saved.overwritten()[:8]
            obs["retained"] = self._retained(last if opts.repeat else result, named_inputs, base_nodes, saved)
        if opts.backward and obs["ok"]:
            obs["backward"], state.grads = self._backward(outputs, pre + [e for m in made[:1] for e in capture(m, "model")])
        if opts.watch:
            obs["watch"], changed_ranges = self._watch_report(watch, recorder, pre, opts.later_step, state)
            state.tainted |= {o.path for o in outputs if any(overlaps(o.where, r) for r in changed_ranges)}
        state.outputs, state.ok = outputs, obs["ok"]
        state.final_inputs = [Entry(e.path, e.ref, e.where, e.version, _copy(e.ref)) for e in pre]
        return obs, state

    def _run_probe(self, loaded: Loaded, recorder: Recorder, pre: list[Entry], named: dict[str, Any]) -> list[Any]:
        """The LLM's probe: it calls the subject by name. A spy takes the arguments of the
        first call as the inputs to watch, and keeps what each call returned."""
        results: list[Any] = []
        name = self.side["target"][-1]
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

    @staticmethod
    def _mutations(pre: list[Entry], recorder: Recorder, span: tuple[int, int] | None = None) -> dict[str, Any]:
        mutated = []
        for e in pre:
            if not isinstance(e.ref, (torch.Tensor, np.ndarray)):
                continue
            version = e.ref._version if isinstance(e.ref, torch.Tensor) and e.version is not None else None
            change = e.current_change()
            writes = recorder.writes_to(e.where)
            if (version is not None and version != e.version) or writes or (change is not None and change > 0):
                lines = sorted({w.line for w in writes if w.line})
                mutated.append({
                    "name": e.path, "v0": e.version, "v1": version, "max_change": change, "ops": sorted({w.op for w in writes})[:4],
                    "lines": lines[:8], "on_line": bool(span and any(span[0] <= n <= span[1] for n in lines)),
                })
        return {"mutated": mutated[:16]}

    @staticmethod
    def _backward(outputs: list[Entry], pre: list[Entry]) -> tuple[dict[str, Any], list[Entry]]:
        loss = _scalar(outputs)
        targets = _grad_targets(pre)
        if loss is None or not targets:
            return {"tried": False}, []
        try:
            grads = torch.autograd.grad(loss, [t for _, t in targets], allow_unused=True)
        except RuntimeError as exc:
            return {"tried": True, "error": _text(exc)}, []
        entries = [Entry(f"grad of {p}", g, None, None, g.detach().cpu().clone()) for (p, _), g in zip(targets, grads) if g is not None]
        return {"tried": True, "error": None}, entries

    @staticmethod
    def _retained(result: Any, named_inputs: dict[str, Any], base: set[int], saved: SavedTensors) -> dict[str, Any]:
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
        return {
            "nodes": len(nodes),
            "state_nodes": len(state_nodes),
            "saved_bytes": saved.alive_bytes(),
            "holders": sorted({p.split("[")[0] for p, _ in held})[:6],
        }

    @staticmethod
    def _watch_report(watch: LineWatch, recorder: Recorder, pre: list[Entry], later: bool, state: State) -> tuple[dict[str, Any], list[Any]]:
        changed: dict[str, dict[str, Any]] = {}
        ranges: list[Any] = []

        def look(when: str) -> None:
            for snap in watch.snapshots:
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
                    changed[e.path] = {"path": e.path, "max_change": change, "when": detail}
                    ranges.append(e.where)

        look("during the call")
        if later:
            _bump(pre)
            look("after a later in-place update of the inputs")
        shares = sorted({(p, other) for snap in watch.snapshots for p, other in snap.shares})
        if watch.snapshots:
            state.at_time = [Entry(e.path, e.ref, e.where, e.version, e.value) for e in watch.snapshots[0].entries]
        report = {
            "ran": watch.ran,
            "changed": list(changed.values())[:8],
            "shares": [{"path": p, "with": o} for p, o in shares][:8],
            "line_hits": watch.line_hits[:4],
        }
        return report, ranges


def _fresh_module(out: Any, inputs: dict[str, Any]) -> bool:
    """A module the call made (none of its parameters belongs to an input)."""
    if not isinstance(out, torch.nn.Module):
        return False
    owned = {id(p) for v in inputs.values() if isinstance(v, torch.nn.Module) for p in v.parameters()}
    return any(True for _ in out.parameters()) and not any(id(p) in owned for p in out.parameters())


def _copy(obj: Any) -> Any:
    from review_copies.sandbox.worker.observe import copy_value

    return copy_value(obj)


def _shape_of(outputs: list[Entry]) -> str:
    if not outputs:
        return "nothing"
    first = outputs[0].ref
    kind = type(first).__name__
    return f"{len(outputs)} value(s), first {outputs[0].path}: {kind}"


def _where(exc: BaseException, filename: str) -> int | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == filename:
            return frame.lineno
    return None


# ---------------------------------------------------------------- finite differences


def gradcheck(runner: Runner, variant: synth.Variant, max_elements: int = 12) -> dict[str, Any]:
    """Autograd's gradient of a weighted sum of the outputs against central differences."""
    try:
        loaded = load(runner.side)
    except SubjectError as exc:
        return {"tried": False, "why": str(exc)}

    def evaluate(perturb: tuple[int, int, float] | None, want_grad: bool) -> tuple[float, list[torch.Tensor] | None, int]:
        reset_torch_state()
        seed(0)
        fn, args, named, _ = runner._build(loaded, variant)
        pre = [e for name, value in named.items() for e in capture(value, name)]
        targets = [t for _, t in _grad_targets(pre) if t.is_floating_point()]
        if perturb is not None:
            j, i, delta = perturb
            with torch.no_grad():
                targets[j].view(-1)[i] += delta
        seed(100)
        out = capture(fn(**args), "result")
        loss = _scalar(out)
        if loss is None:
            raise SubjectError("no output requires grad")
        grads = None
        if want_grad:
            grads = list(torch.autograd.grad(loss, targets, allow_unused=True))
        return float(loss.detach()), grads, len(targets)

    try:
        _, grads, n = evaluate(None, True)
    except Exception as exc:
        return {"tried": False, "why": _text(exc)}
    assert grads is not None
    eps, worst, worst_at = 1e-3, 0.0, ""
    agree = True
    try:
        for j in range(n):
            g = grads[j]
            flat = torch.zeros(0) if g is None else g.reshape(-1).cpu()
            count = flat.numel() if g is not None else 0
            for i in range(min(count, max_elements)):
                up = evaluate((j, i, eps), False)[0]
                down = evaluate((j, i, -eps), False)[0]
                numeric = (up - down) / (2 * eps)
                analytic = float(flat[i])
                diff = abs(numeric - analytic)
                if diff > 2e-2 + 2e-2 * abs(numeric):
                    agree = False
                if diff > worst:
                    worst, worst_at = diff, f"input {j} element {i}: autograd {analytic:.4g}, finite differences {numeric:.4g}"
    except Exception as exc:
        return {"tried": False, "why": _text(exc)}
    gc.collect()
    return {"tried": True, "agree": agree, "max_diff": worst, "worst": worst_at}


# ------------------------------------------------------------------ the search


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


MAX_TRIES = 12  # calls of the original while searching inputs
MAX_FIX_TRIES = 6  # more calls, of both, when the original stops at the finding's own error
SEARCH_SECONDS = 6.0  # of the probe's 30 s wall clock

# Errors that are the finding itself: inputs that reach them count as inputs the code runs with.
_SIGNATURES = {
    "backward": r"modified by an inplace operation",
    "leaf-inplace": r"leaf Variable that requires grad|view of a leaf Variable",
    "raises": r"Can't call numpy\(\) on Tensor that requires grad|can't convert \w+(:\d+)? device type tensor to numpy",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _error_site(exc: BaseException, filename: str, span: tuple[int, int], source: str) -> tuple[int, frozenset[str]]:
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


def _good(trial: Trial, signatures: str | None) -> bool:
    return trial.stage == "ok" or bool(trial.stage == "call" and signatures and re.search(signatures, trial.error))


def _priority(plan: synth.Plan, trial: Trial) -> list[synth.Slot]:
    """The slots to change first: those the error names, then the rest, in order."""
    coords = plan.coordinates()

    def score(slot: synth.Slot) -> int:
        if any(slot.path == b or (b.endswith(":") and slot.path.startswith(b)) for b in trial.blame):
            return 0
        if slot.names & trial.names:
            return 1
        if trial.stage == "inputs" and slot.path.startswith("init:") and "construct" in trial.error:
            return 1
        return 2

    return sorted(coords, key=lambda slot: (score(slot), slot.certainty))


@dataclass
class Search:
    choice: dict[str, int]
    tries: int
    best: Trial
    described: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tries": self.tries, "limit": MAX_TRIES, "fix_limit": MAX_FIX_TRIES, "ran": self.best.stage == "ok",
            "inputs": dict(list(self.described.items())[:12]),
        }
        if self.best.stage != "ok":
            out["error"] = self.best.error
        return out


def search(original: Runner, fixed: Runner | None, recipes: list[str], device: str) -> Search:
    """Candidates of each input, tried one change at a time (the inputs the error is about
    first), keeping a change when the original gets further, until it runs, or reaches the
    finding's own error; then, if it stopped there, until the fix runs too."""
    try:
        return _search(original, fixed, recipes, device)
    except Exception as exc:  # a bug here must not cost the verdict: the first candidates remain
        return Search({}, 0, Trial("inputs", f"the input search failed: {_text(exc)}"))


def _normal(choice: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in choice.items() if v}


def _search(original: Runner, fixed: Runner | None, recipes: list[str], device: str) -> Search:
    signatures = "|".join(_SIGNATURES[r] for r in recipes if r in _SIGNATURES) or None
    variant = synth.Variant("plain", device=device)
    started = time.monotonic()
    try:
        loaded = load(original.side)
        plan = original.plan(loaded)
    except (SubjectError, synth.Unbuildable):
        return Search({}, 0, Trial("load"))
    choice: dict[str, int] = {}
    best = original.trial(variant, choice)
    tries = 1
    seen = {frozenset()}

    def climb(score: Callable[[dict[str, int]], tuple[Trial, tuple[int, ...], bool]], current: tuple[Trial, tuple[int, ...], bool], budget: int) -> tuple[dict[str, int], Trial, bool]:
        nonlocal tries
        base, (trial, value, done) = dict(choice), current
        used = 0
        while not done and used < budget and time.monotonic() - started < SEARCH_SECONDS:
            moved = False
            for slot in _priority(plan, trial):
                for k in range(len(slot.cands)):
                    if k == base.get(slot.path, 0):
                        continue
                    new = _normal({**base, slot.path: k})
                    key = frozenset(new.items())
                    if key in seen:
                        continue
                    seen.add(key)
                    t, v, d = score(new)
                    tries += 1
                    used += 1
                    if d or v > value:
                        base, trial, value, done, moved = new, t, v, d, True
                        break
                    if used >= budget:
                        break
                if moved or used >= budget:
                    break
            if not moved:
                break
        return base, trial, done

    def original_score(c: dict[str, int]) -> tuple[Trial, tuple[int, ...], bool]:
        t = original.trial(variant, c)
        return t, t.progress(), _good(t, signatures)

    if not _good(best, signatures):
        choice, best, _ = climb(original_score, (best, best.progress(), False), MAX_TRIES - 1)
    if fixed is not None and best.stage == "call" and _good(best, signatures):
        # The original stopped at the finding's error: the rest of the code is the fix's to run.
        def both(c: dict[str, int]) -> tuple[Trial, tuple[int, ...], bool]:
            o = original.trial(variant, c)
            if not _good(o, signatures):
                return o, (-1, 0), False
            f = fixed.trial(variant, c)
            return f, f.progress(), f.stage == "ok"

        first = fixed.trial(variant, choice)
        tries += 1
        if first.stage != "ok":
            found, _, done = climb(both, (first, first.progress(), False), MAX_FIX_TRIES)
            if done:
                choice = found
    return Search(choice, tries, best, plan.describe(choice))


# ------------------------------------------------------------------ the plan


def variants_for(needs: set[str], device: str) -> list[synth.Variant]:
    out = [synth.Variant("plain", device=device), synth.Variant("grad", requires_grad=True, device=device)]
    if "strided" in needs:
        out.append(synth.Variant("strided", contiguous=False, device=device))
    return out


def _options(needs: set[str]) -> Options:
    return Options(watch="watch" in needs, later_step="later_step" in needs, backward="backward" in needs)


_LEAF_ERROR = _SIGNATURES["leaf-inplace"]


def run(request: dict[str, Any]) -> dict[str, Any]:
    torch.set_num_threads(1)
    device = request.get("device", "cpu")
    workdir = request.get("workdir", ".")
    signatures = list(request["signatures"])
    needs = needs_for(signatures)
    sides = request["sides"]
    probe = request.get("probe", "")
    original = Runner(sides["original"], workdir, probe)
    fixed = Runner(sides["fixed"], workdir, probe, hints=original.hints) if sides.get("fixed") else None
    opts = _options(needs)
    answer: dict[str, Any] = {"device": device}
    if not probe:
        found = search(original, fixed, signatures, device)
        original.choice = found.choice
        if fixed is not None:
            fixed.choice = found.choice
        answer["search"] = found.to_json()
    first = original.execute(synth.Variant("plain", device=device), opts)
    if _exhausted(first[0]):
        return {**answer, "variants": [{"variant": "plain", "original": first[0]}]}
    records = []
    variants = variants_for(needs, device)
    if "raises" in signatures and device == "cpu" and not probe and _takes_device(original):
        # The code runs on a device it is given: without a GPU, the meta device stands in
        # for one (conversions to NumPy fail there as they do on a GPU).
        variants.append(synth.Variant("device", device="meta"))
    for variant in variants:
        o_obs, o_state = first if variant.name == "plain" else original.execute(variant, opts)
        if variant.name == "grad" and "leaf-inplace" not in signatures and re.search(_LEAF_ERROR, o_obs.get("error") or ""):
            # An in-place write on an input that is a leaf: a caller passes activations.
            variant = synth.Variant("grad", requires_grad=True, device=device, leaf=False)
            o_obs, o_state = original.execute(variant, opts)
            o_obs["inputs"] = "activations (not leaves) that require grad"
        record: dict[str, Any] = {"variant": variant.name, "original": o_obs}
        if fixed is not None:
            f_obs, f_state = fixed.execute(variant, opts)
            record["fixed"] = f_obs
            try:
                record["compare"] = _compare(o_state, f_state, strict="strict" in needs)
            except Exception as exc:  # values the observer cannot compare: say so, do not fail the probe
                record["compare"] = {"comparable": False, "error": _text(exc)}
        records.append(record)
        if original.probe:
            break
    answer["variants"] = records
    if "retention" in needs:
        answer["retention"] = _retention(original, fixed, device)
    if "gradcheck" in needs:
        grad_variant = synth.Variant("grad", requires_grad=True, device=device)
        answer["gradcheck"] = {"original": gradcheck(original, grad_variant)}
        if fixed is not None:
            answer["gradcheck"]["fixed"] = gradcheck(fixed, grad_variant)
    if "saved" in needs:
        grad_variant = synth.Variant("grad", requires_grad=True, device=device)
        answer["saved"] = {"original": original.execute(grad_variant, Options(hooks=True))[0].get("saved_overwritten", [])}
        if fixed is not None:
            answer["saved"]["fixed"] = fixed.execute(grad_variant, Options(hooks=True))[0].get("saved_overwritten", [])
    return answer


def _exhausted(obs: dict[str, Any]) -> bool:
    """The subject ran out of memory: running it again in more variants only burns the limits."""
    error = obs.get("error") or ""
    return obs.get("error_type") == "MemoryError" or "can't allocate memory" in error or "out of memory" in error


def _retention(original: Runner, fixed: Runner | None, device: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side, runner in (("original", original), ("fixed", fixed)):
        if runner is None:
            continue
        runs = []
        for steps in (1, 3):
            variant = synth.Variant(f"steps{steps}", requires_grad=True, steps=steps, device=device)
            uses_loader = _takes_loader(runner)
            obs, _ = runner.execute(variant, Options(hooks=True, repeat=not uses_loader))
            runs.append({"steps": steps, "ok": obs["ok"], "error": obs.get("error"), **obs.get("retained", {})})
            gc.collect()
        out[side] = runs
    return out


def _takes_device(runner: Runner) -> bool:
    try:
        loaded = load(runner.side)
        plan = runner.plan(loaded)
    except (SubjectError, synth.Unbuildable, TypeError, ValueError):
        return False
    return any(s.cands and s.cands[0].kind == "device" for s in plan.slots.values())


def _takes_loader(runner: Runner) -> bool:
    """Whether the subject iterates a loader argument (one call then takes the steps)."""
    try:
        loaded = load(runner.side)
        plan = runner.plan(loaded)
    except (SubjectError, synth.Unbuildable, TypeError, ValueError):
        return False
    for name in plan.params:
        slot = plan.slots[name]
        if slot.cands and slot.cands[min(runner.choice.get(name, 0), len(slot.cands) - 1)].kind == "loader":
            return True
    return False


def _compare(o: State, f: State, strict: bool) -> dict[str, Any]:
    if not (o.ok and f.ok):
        return {"comparable": False}
    outputs = [d for d in compare(o.outputs, f.outputs, strict) if not _tainted(d["path"], o.tainted)]
    explained = [d for d in compare(o.outputs, f.outputs, strict) if _tainted(d["path"], o.tainted)]
    inputs = [d for d in compare(o.final_inputs, f.final_inputs, False)]
    return {
        "comparable": True,
        "outputs": outputs[:6],
        "explained": explained[:6],
        "final_inputs": inputs[:6],
        "at_time": compare(o.at_time, f.at_time, False)[:6] if o.at_time and f.at_time else [],
        "grads": compare(o.grads, f.grads, False)[:6] if o.grads and f.grads else [],
    }


def _tainted(path: str, tainted: set[str]) -> bool:
    return any(path == t or path.startswith(t + "[") or path.startswith(t + ".") or t.startswith(path + "[") for t in tainted)
