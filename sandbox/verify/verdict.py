"""From what the probe saw to a verdict with one line of evidence a reader can check.

The rule is the contract's: `confirmed` when the original shows the recipe's signature
and the fix does not while computing the same values; `refuted` when the original does
not show it, or the fix changes the values, modifies or aliases what the original left
alone, or raises; `inconclusive` otherwise. A difference in a value that shares memory
with what the original modified is the bug itself, not a change of result (the child
marks those "explained").

Runs in the reviewer's process: no torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN = "confirmed", "refuted", "inconclusive", "not-run"
NOT_APPLICABLE = "n/a"

# Recipes whose bug changes the values computed from the shared tensor.
_VALUE_BUGS = frozenset(("alias", "snapshot", "input-mutation"))

_VARIANT_WORDS = {
    "plain": "with plain inputs", "grad": "with inputs that require grad", "strided": "with non-contiguous inputs",
    "device": "on the meta device, standing in for a GPU",
}
# Runs whose tensors hold no data (the meta device): they can show an error, never judge a fix.
_STAND_INS = frozenset(("device",))


@dataclass(frozen=True)
class Decision:
    status: str
    evidence: str
    recipe: str = ""


Records = list[dict[str, Any]]


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


def _ok(side: dict[str, Any] | None) -> bool:
    return bool(side and side.get("ok"))


def _pairs(records: Records) -> list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any]]]:
    return [(r["variant"], r["original"], r.get("fixed"), r.get("compare", {})) for r in records]


# -------------------------------------------------------------- fix breaks


def _mutated(side: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in side.get("mutated", [])}


def fix_breaks(records: Records) -> str | None:
    """Why the fix is wrong where the original ran, or None."""
    found = fix_break(records)
    return found[1] if found else None


def fix_break(records: Records) -> tuple[str, str] | None:
    """(kind, why) the fix is wrong where the original ran: kind is raises, result, inputs,
    mutates or aliases."""
    for variant, o, f, cmp in _pairs(records):
        if not _ok(o) or f is None or variant in _STAND_INS:
            continue
        words = _VARIANT_WORDS.get(variant, f"in the {variant} run")
        if not _ok(f):
            return "raises", f"the fix raises where the original ran ({words}): {short_error(f.get('error'))}"
        if cmp.get("outputs"):
            return "result", "the fix changes the result: " + _diff_text(cmp["outputs"][0])
        if cmp.get("at_time"):
            return "result", "with the fix the value differs when it is taken: " + _diff_text(cmp["at_time"][0])
        o_mut, f_mut = _mutated(o), _mutated(f)
        for d in cmp.get("final_inputs", []):
            if (d["path"] in o_mut) != (d["path"] in f_mut):
                continue  # the mutation the fix removes (or adds: reported below)
            if d["path"] in o_mut and o_mut[d["path"]].get("on_line") and not f_mut[d["path"]].get("on_line"):
                continue  # the fix removes the write on the finding's line; others remain
            if str(d.get("what", "")).startswith("only in"):
                continue  # a separate object in one run (a copied module): nothing to compare
            return "inputs", "the fix changes what the inputs hold afterwards: " + _diff_text(d)
        for name in f_mut:
            if name not in o_mut:
                return "mutates", f"the fix modifies input `{name}`, which the original left alone ({words})"
        o_alias = {(a["output"], a["input"]) for a in o.get("out_aliases", [])}
        for a in f.get("out_aliases", []):
            if (a["output"], a["input"]) not in o_alias and not any(a["input"] == i for _, i in o_alias):
                return "aliases", f"the fix's result `{a['output']}` shares memory with input `{a['input']}`, the original's did not ({words})"
    return None


def _diff_text(d: dict[str, Any]) -> str:
    if d.get("what") == "values":
        return f"`{d['path']}` differs (max abs diff {num(d.get('max_abs_diff'))})"
    return f"`{d['path']}`: {d.get('what')}"


# ---------------------------------------------------------------- recipes


def _input_mutation(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    ran, same_in_fix = False, None
    for variant, o, f, _ in _pairs(records):
        if not _ok(o):
            continue
        ran = True
        f_mut = _mutated(f) if _ok(f) else {}
        for name, m in _mutated(o).items():
            what = f"input `{name}` was modified: version {m.get('v0')}→{m.get('v1')}, max change {num(m.get('max_change'))}"
            if m.get("ops"):
                what += f" (by {', '.join(m['ops'])})"
            if variant != "plain":
                what += f" {_VARIANT_WORDS.get(variant, '')}"
            if not has_fix:
                return Decision(CONFIRMED, what + "; no fix is offered to compare")
            if not _ok(f):
                continue
            if name in f_mut:
                same_in_fix = f"the original modifies input `{name}`, and so does the fix"
                continue
            return Decision(CONFIRMED, what + "; with the fix it was not")
    if same_in_fix:
        return Decision(INCONCLUSIVE, same_in_fix)
    if ran:
        return Decision(REFUTED, "no input was modified: versions and values of every argument are unchanged after the call")
    return Decision(INCONCLUSIVE, "")


def _bases(names: list[str]) -> set[str]:
    return {re.sub(r"^input `([^`]*)`$", r"\1", n).split(".")[0].split("[")[0] for n in names}


def _alias_seen(side: dict[str, Any]) -> str | None:
    watch = side.get("watch") or {}
    if watch.get("shares"):
        share = watch["shares"][0]
        changed = next((c for c in watch.get("changed", []) if c["path"] == share["path"]), None)
        what = "the result" + share["path"][len("return value"):] if share["path"].startswith("return value") else f"`{share['path']}`"
        text = f"{what} shares memory with {share['with']}"
        if changed:
            text += f" and changed {changed['when']} (max change {num(changed['max_change'])})"
        return text
    for hit in watch.get("line_hits", []):
        if len(_bases(hit)) >= 2:
            return f"the in-place write on the finding's line changed {', '.join(f'`{n}`' if not n.startswith('input') else n for n in hit)} at once"
    return None


def _alias(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    ran = never = False
    for _, o, f, _ in _pairs(records):
        if not _ok(o):
            continue
        watch = o.get("watch") or {}
        if not watch.get("ran"):
            never = True
            continue
        ran = True
        seen = _alias_seen(o)
        if seen is None:
            continue
        if not has_fix:
            return Decision(CONFIRMED, seen + "; no fix is offered to compare")
        if _ok(f) and _alias_seen(f) is None:
            return Decision(CONFIRMED, seen + "; with the fix it is a separate tensor")
    if ran:
        return Decision(REFUTED, "the value bound on the finding's line shares memory with no input or other name, and no write there reached another name")
    if never:
        return Decision(INCONCLUSIVE, "the finding's line never ran with the synthesised inputs")
    return Decision(INCONCLUSIVE, "")


def _snapshot(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    ran = never = False
    for _, o, f, _ in _pairs(records):
        if not _ok(o):
            continue
        watch = o.get("watch") or {}
        if not watch.get("ran"):
            never = True
            continue
        ran = True
        changed = watch.get("changed", [])
        shares = watch.get("shares", [])
        fixed_shares = ((f or {}).get("watch") or {}).get("shares", []) if _ok(f) else None
        if not changed and shares and fixed_shares == []:
            # Nothing changed it during the call, but it is the same memory as the live state.
            s0 = shares[0]
            return Decision(CONFIRMED, f"`{s0['path']}` shares memory with {s0['with']}, so it follows every in-place update of it; with the fix it does not")
        if not changed:
            continue
        c = changed[0]
        text = f"`{c['path']}` changed {c['when']} (max change {num(c['max_change'])})"
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if _ok(f) and (f.get("watch") or {}).get("ran") and not f["watch"].get("changed"):
            return Decision(CONFIRMED, text + "; with the fix it did not")
    if ran:
        return Decision(REFUTED, "the value taken on the finding's line kept its values during the call and after a later in-place update of the inputs")
    if never:
        return Decision(INCONCLUSIVE, "the finding's line never ran with the synthesised inputs")
    return Decision(INCONCLUSIVE, "")


def _retention_of(runs: list[dict[str, Any]]) -> tuple[bool, str] | None:
    if len(runs) < 2 or not all(r.get("ok") for r in runs):
        return None
    one, three = runs[0], runs[-1]
    holders = ", ".join("the result" if h == "result" else f"`{h}`" for h in three.get("holders", [])) or "the result"
    if three.get("nodes", 0) > one.get("nodes", 0):
        saved = f", {size(three['saved_bytes'])} of saved tensors" if three.get("saved_bytes") else ""
        return True, f"autograd nodes kept alive by {holders}: {one['nodes']} after 1 step, {three['nodes']} after 3{saved}"
    if one.get("state_nodes", 0) > 0:
        return True, f"{holders} keeps {one['state_nodes']} autograd nodes of a finished step alive"
    return False, f"{one.get('nodes', 0)} autograd nodes reachable after 1 step and {three.get('nodes', 0)} after 3"


def _retention(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    data = answer.get("retention") or {}
    original = _retention_of(data.get("original", []))
    if original is None:
        error = next((r.get("error") for r in data.get("original", []) if r.get("error")), "")
        return Decision(INCONCLUSIVE, f"the steps did not run: {short_error(error)}" if error else "")
    present, text = original
    if not present:
        return Decision(REFUTED, f"no graph outlives its step: {text}")
    if not has_fix:
        return Decision(CONFIRMED, text + "; no fix is offered to compare")
    fixed = _retention_of(data.get("fixed", []))
    if fixed is None:
        return Decision(INCONCLUSIVE, text + "; the fix did not run")
    if fixed[0]:
        return Decision(INCONCLUSIVE, text + f"; with the fix still {fixed[1]}")
    return Decision(CONFIRMED, text + f"; with the fix {fixed[1]}")


def _warning(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    ran, both = False, None
    for _, o, f, _ in _pairs(records):
        if not _ok(o):
            continue
        ran = True
        warned = set(o.get("warnings", []))
        if not warned:
            continue
        first = sorted(warned)[0]
        if not has_fix:
            return Decision(CONFIRMED, f'the original warned "{short_error(first)}"; no fix is offered to compare')
        if not _ok(f):
            continue
        gone = warned - set(f.get("warnings", []))
        if gone:
            return Decision(CONFIRMED, f'the original warned "{short_error(sorted(gone)[0], 230)}"; the fix ran without the warning and gave the same values')
        both = f'the original warned "{short_error(first)}", and so did the fix'
    if both:
        return Decision(INCONCLUSIVE, both)
    if ran:
        return Decision(REFUTED, "the original ran without any warning")
    return Decision(INCONCLUSIVE, "")


def _raised(side: dict[str, Any], pattern: str | None = None) -> str | None:
    if side.get("ok") or side.get("stage") != "call":
        return None
    error = side.get("error", "")
    if pattern and not re.search(pattern, error):
        return None
    return error


def _raises_with(records: Records, has_fix: bool, pattern: str | None, what: str) -> Decision:
    ran_clean, both = [], None
    for variant, o, f, _ in _pairs(records):
        error = _raised(o, pattern)
        words = _VARIANT_WORDS.get(variant, "")
        if error is None:
            if _ok(o):
                ran_clean.append(variant)
            continue
        text = f"the original raised {short_error(error)} ({words})"
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if _ok(f):
            return Decision(CONFIRMED, text + "; the fix ran")
        both = text + f"; the fix raised too: {short_error((f or {}).get('error'))}"
    if both:
        return Decision(INCONCLUSIVE, both)
    if ran_clean and ("grad" in ran_clean or pattern is None):
        return Decision(REFUTED, f"{what} ran without error " + " and ".join(_VARIANT_WORDS[v] for v in ran_clean if v in _VARIANT_WORDS))
    return Decision(NOT_APPLICABLE, "")


def _raises(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    return _raises_with(records, has_fix, None, "the original")


_INPLACE = r"modified by an inplace operation"
_LEAF = r"leaf Variable that requires grad|view of a leaf Variable"


def _backward(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    tried_clean = False
    for variant, o, f, _ in _pairs(records):
        if variant != "grad":
            continue
        error = _raised(o, _INPLACE) or (o.get("backward") or {}).get("error")
        if error and re.search(_INPLACE, error):
            text = f"backward raised: {short_error(error)}"
            if not has_fix:
                return Decision(CONFIRMED, text + "; no fix is offered to compare")
            fb = (f or {}).get("backward") or {}
            if _ok(f) and not fb.get("error"):
                return Decision(CONFIRMED, text + "; with the fix backward ran" + ("" if fb.get("tried") else " (the fix's call includes it)"))
            return Decision(INCONCLUSIVE, text + "; the fix failed as well")
        if _ok(o) and (o.get("backward") or {}).get("tried"):
            tried_clean = True
    if tried_clean:
        return Decision(REFUTED, "forward and backward ran without error with inputs that require grad")
    return Decision(NOT_APPLICABLE, "")


def _leaf_inplace(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    decision = _raises_with([r for r in records if r["variant"] == "grad"], has_fix, _LEAF, "the in-place op")
    if decision.status == REFUTED:
        return Decision(REFUTED, "no in-place op on a leaf that requires grad: the original ran with inputs that require grad")
    return decision


def _silent_grad(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    check = answer.get("gradcheck") or {}
    saved = answer.get("saved") or {}
    o_check, f_check = check.get("original") or {}, check.get("fixed") or {}
    silent = [s for s in saved.get("original", []) if s.get("silent")]
    f_silent = [s for s in saved.get("fixed", []) if s.get("silent")]
    if o_check.get("tried") and not o_check.get("agree"):
        text = f"gradients are silently wrong: {o_check.get('worst')}"
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if f_check.get("tried") and f_check.get("agree"):
            return Decision(CONFIRMED, text + "; with the fix autograd agrees with finite differences")
        return Decision(INCONCLUSIVE, text + "; the fix's gradients could not be checked or are wrong too")
    if silent:
        s = silent[0]
        at = f" at line {s['line']}" if s.get("line") else ""
        text = (
            f"a tensor saved for backward by {s['saved_by']} was overwritten by {s['written_by']}{at} "
            "without a version bump, so backward reads the new values"
        )
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        if not f_silent and "fixed" in saved:
            return Decision(CONFIRMED, text + "; with the fix nothing saved is overwritten")
        return Decision(INCONCLUSIVE, text + "; the fix does the same")
    if o_check.get("tried") and o_check.get("agree"):
        diff = num(o_check.get("max_diff"))
        return Decision(REFUTED, f"autograd's gradients agree with finite differences (max diff {diff}) and no saved tensor is overwritten")
    return Decision(NOT_APPLICABLE, "")


def _copy_bytes(records: Records, answer: dict[str, Any], has_fix: bool) -> Decision:
    if not has_fix:
        return Decision(INCONCLUSIVE, "no fix is offered to compare the copies with")
    compared = []
    for variant, o, f, _ in _pairs(records):
        if not (_ok(o) and _ok(f)):
            continue
        ob, fb = o.get("copy_bytes", 0), f.get("copy_bytes", 0)
        og, fg = o.get("graph_copies", 0), f.get("graph_copies", 0)
        words = _VARIANT_WORDS.get(variant, "")
        if fb < ob:
            ops = ", ".join(f"{k}×{v}" for k, v in sorted(o.get("copy_ops", {}).items()))
            return Decision(CONFIRMED, f"the fix copies {size(fb)} instead of {size(ob)} per call ({ops} in the original, {words}) and gives the same values")
        if fg < og:
            text = f"the original records {og} copy in the autograd graph ({words}), the fix {fg}"
            return Decision(CONFIRMED, text + ", with the same bytes copied and the same values")
        compared.append((ob, fb))
    if compared:
        ob, fb = compared[0]
        return Decision(REFUTED, f"the fix copies as much as the original ({size(fb)} vs {size(ob)} per call): the copy is not redundant")
    return Decision(INCONCLUSIVE, "")


DECIDERS: dict[str, Callable[[Records, dict[str, Any], bool], Decision]] = {
    "input-mutation": _input_mutation,
    "alias": _alias,
    "snapshot": _snapshot,
    "retention": _retention,
    "warning": _warning,
    "raises": _raises,
    "backward": _backward,
    "leaf-inplace": _leaf_inplace,
    "silent-grad": _silent_grad,
    "copy-bytes": _copy_bytes,
}


def _not_runnable(records: Records) -> str | None:
    """The subject never ran: it did not load, or no inputs could be built for it."""
    originals = [r["original"] for r in records]
    if originals and all(not o.get("ok") and o.get("stage") in ("load", "inputs") for o in originals):
        return short_error(originals[0].get("error"), 240)
    return None


def _nothing_ran(records: Records) -> str | None:
    errors = [r["original"].get("error") for r in records if not r["original"].get("ok")]
    if records and len(errors) == len(records):
        return short_error(errors[0], 240)
    return None


def decide(answer: dict[str, Any], recipes: tuple[str, ...], has_fix: bool) -> Decision:
    every: Records = answer.get("variants", [])
    records = [r for r in every if r["variant"] not in _STAND_INS]
    why = _not_runnable(records)
    if why:
        return Decision(INCONCLUSIVE, f"could not run the code: {why}")
    broken = fix_break(records) if has_fix else None
    decisions = [(name, DECIDERS[name](every if name == "raises" else records, answer, has_fix)) for name in recipes if name in DECIDERS]
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
    failed = _nothing_ran(records)
    if failed:
        tries = (answer.get("search") or {}).get("tries")
        sets = f" ({tries} input sets tried)" if tries and tries > 1 else ""
        return Decision(INCONCLUSIVE, f"the original failed with the synthesised inputs{sets}: {failed}")
    return Decision(INCONCLUSIVE, f"none of the checks ({', '.join(recipes)}) could decide")
