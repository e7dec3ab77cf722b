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
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sandbox import inputs as synth
from sandbox.observer import (
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
from sandbox.recipes import needs_for

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
    code = getattr(fn, "__code__", None)
    if code is None:
        raise SubjectError(f"`{'.'.join(target)}` is not a Python function")
    if isinstance(obj, staticmethod):
        owner = None
        fn = obj.__func__
    elif isinstance(obj, classmethod):
        fn = obj.__get__(None, owner)
        owner = None
    return Loaded(namespace, fn, owner, code, failures)


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
    def __init__(self, side: dict[str, Any], workdir: str, probe: str = "") -> None:
        self.side = side
        self.workdir = workdir
        self.probe = probe

    def _build(self, loaded: Loaded, variant: synth.Variant) -> tuple[Any, dict[str, Any], dict[str, Any], synth.World]:
        world = synth.World(variant, self.workdir)
        if loaded.owner is not None:
            obj = synth.instance(loaded.owner, world)
            fn = loaded.fn.__get__(obj, loaded.owner)
            args = synth.arguments(fn, world)
            return fn, args, {"self": obj, **args}, world
        args = synth.arguments(loaded.fn, world)
        return loaded.fn, args, dict(args), world

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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with watch, saved, copies, recorder:
                    if self.probe:
                        results = self._run_probe(loaded, recorder, pre, named_inputs)
                    else:
                        for k in range(calls):
                            seed(100 + k)
                            results.append(fn(**(args if k == 0 else synth.refresh(args, world))))
                obs["ok"] = True
            except (Exception, SystemExit) as exc:
                obs.update(error=_text(exc), stage="call", error_type=type(exc).__name__)
                obs["where"] = _where(exc, loaded.namespace["__file__"])
        reset_torch_state()
        obs["warnings"] = sorted({f"{w.category.__name__}: {' '.join(str(w.message).split())}"[:MAX_MESSAGE] for w in caught})
        result = results[-1] if len(results) == 1 else results
        outputs = capture(result, "result") if obs["ok"] else []
        obs.update(self._mutations(pre, recorder))
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
            obs["retained"] = self._retained(result, named_inputs, base_nodes, saved)
        if opts.backward and obs["ok"]:
            obs["backward"], state.grads = self._backward(outputs, pre)
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
    def _mutations(pre: list[Entry], recorder: Recorder) -> dict[str, Any]:
        mutated = []
        for e in pre:
            if not isinstance(e.ref, (torch.Tensor, np.ndarray)):
                continue
            version = e.ref._version if isinstance(e.ref, torch.Tensor) and e.version is not None else None
            change = e.current_change()
            writes = recorder.writes_to(e.where)
            if (version is not None and version != e.version) or writes or (change is not None and change > 0):
                mutated.append(
                    {"name": e.path, "v0": e.version, "v1": version, "max_change": change, "ops": sorted({w.op for w in writes})[:4]}
                )
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


def _copy(obj: Any) -> Any:
    from sandbox.observer import copy_value

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


def gradcheck(side: dict[str, Any], variant: synth.Variant, workdir: str, max_elements: int = 12) -> dict[str, Any]:
    """Autograd's gradient of a weighted sum of the outputs against central differences."""
    try:
        loaded = load(side)
    except SubjectError as exc:
        return {"tried": False, "why": str(exc)}
    runner = Runner(side, workdir)

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


# ------------------------------------------------------------------ the plan


def variants_for(needs: set[str], device: str) -> list[synth.Variant]:
    out = [synth.Variant("plain", device=device), synth.Variant("grad", requires_grad=True, device=device)]
    if "strided" in needs:
        out.append(synth.Variant("strided", contiguous=False, device=device))
    return out


def _options(needs: set[str]) -> Options:
    return Options(watch="watch" in needs, later_step="later_step" in needs, backward="backward" in needs)


def _pick_labels(runner: Runner, device: str, opts: Options) -> tuple[str, tuple[dict[str, Any], State]]:
    """Float targets first; class labels when the original only runs with those."""
    first = runner.execute(synth.Variant("plain", device=device), opts)
    if first[0]["ok"] or first[0].get("stage") != "call":
        return "float", first
    second = runner.execute(synth.Variant("plain", labels="long", device=device), opts)
    return ("long", second) if second[0]["ok"] else ("float", first)


def run(request: dict[str, Any]) -> dict[str, Any]:
    torch.set_num_threads(1)
    device = request.get("device", "cpu")
    workdir = request.get("workdir", ".")
    signatures = list(request["signatures"])
    needs = needs_for(signatures)
    sides = request["sides"]
    original = Runner(sides["original"], workdir, request.get("probe", ""))
    fixed = Runner(sides["fixed"], workdir, request.get("probe", "")) if sides.get("fixed") else None
    opts = _options(needs)
    labels, first = _pick_labels(original, device, opts)
    if _exhausted(first[0]):
        return {"variants": [{"variant": "plain", "original": first[0]}], "labels": labels, "device": device}
    records = []
    for variant in variants_for(needs, device):
        variant = synth.Variant(variant.name, variant.requires_grad, variant.contiguous, labels, variant.steps, device)
        o_obs, o_state = first if variant.name == "plain" else original.execute(variant, opts)
        record: dict[str, Any] = {"variant": variant.name, "original": o_obs}
        if fixed is not None:
            f_obs, f_state = fixed.execute(variant, opts)
            record["fixed"] = f_obs
            record["compare"] = _compare(o_state, f_state, strict="strict" in needs)
        records.append(record)
        if original.probe:
            break
    answer: dict[str, Any] = {"variants": records, "labels": labels, "device": device}
    if "retention" in needs:
        answer["retention"] = _retention(original, fixed, labels, device)
    if "gradcheck" in needs:
        grad_variant = synth.Variant("grad", requires_grad=True, labels=labels, device=device)
        answer["gradcheck"] = {"original": gradcheck(sides["original"], grad_variant, workdir)}
        if sides.get("fixed"):
            answer["gradcheck"]["fixed"] = gradcheck(sides["fixed"], grad_variant, workdir)
    if "saved" in needs:
        grad_variant = synth.Variant("grad", requires_grad=True, labels=labels, device=device)
        answer["saved"] = {"original": original.execute(grad_variant, Options(hooks=True))[0].get("saved_overwritten", [])}
        if fixed is not None:
            answer["saved"]["fixed"] = fixed.execute(grad_variant, Options(hooks=True))[0].get("saved_overwritten", [])
    return answer


def _exhausted(obs: dict[str, Any]) -> bool:
    """The subject ran out of memory: running it again in more variants only burns the limits."""
    error = obs.get("error") or ""
    return obs.get("error_type") == "MemoryError" or "can't allocate memory" in error or "out of memory" in error


def _retention(original: Runner, fixed: Runner | None, labels: str, device: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side, runner in (("original", original), ("fixed", fixed)):
        if runner is None:
            continue
        runs = []
        for steps in (1, 3):
            variant = synth.Variant(f"steps{steps}", requires_grad=True, labels=labels, steps=steps, device=device)
            uses_loader = _takes_loader(runner)
            obs, _ = runner.execute(variant, Options(hooks=True, repeat=not uses_loader))
            runs.append({"steps": steps, "ok": obs["ok"], "error": obs.get("error"), **obs.get("retained", {})})
            gc.collect()
        out[side] = runs
    return out


def _takes_loader(runner: Runner) -> bool:
    try:
        loaded = load(runner.side)
        params = inspect.signature(loaded.fn).parameters
    except (SubjectError, TypeError, ValueError):
        return False
    return any(synth.kind_of(p.name, p.annotation) == "loader" for p in params.values())


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
