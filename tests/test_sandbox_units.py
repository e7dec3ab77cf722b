"""The torch-free parts: subject extraction, the recipe vocabulary, verdict combination."""

from __future__ import annotations

import textwrap

import pytest

from review_copies.model.findings import Category, Finding, Severity, Status, Suggestion
from review_copies.rules import all_rules
from review_copies.sandbox import recipes
from review_copies.sandbox.recipes import base
from review_copies.sandbox.recipes.base import Recipe
from review_copies.sandbox.verify import subjects, verdict
from review_copies.sandbox.verify.verifier import DeviceVerdict, combine

SCRIPT = textwrap.dedent(
    '''
    import copy
    import torch
    import wandb
    from torch import nn

    EPS = 1e-8
    LR = EPS * 10
    UNUSED = 3

    def helper(t):
        return t / (t.norm() + EPS)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = x.float()
            y.add_(1)
            return self.fc(helper(y))

    def train(model, loader):
        for x, y in loader:
            best = model.state_dict()
        return best

    model = Net()
    for step in range(10**9):
        wandb.log({"step": step})

    if __name__ == "__main__":
        train(model, [])
    '''
).lstrip("\n")


def _finding(line: int, fix: Suggestion | None = None) -> Finding:
    return Finding("train.py", line, line, Category.ALIAS_MUTATION, "X1", Severity.WARNING, "m", suggestion=fix)


def test_a_method_brings_its_class_helpers_constants_and_imports_only() -> None:
    subject = subjects.build(_finding(19), SCRIPT)
    side = subject.original
    assert side.target == ("Net", "forward")
    kept = [line for line in side.source.splitlines() if line.strip()]
    assert "import torch" in kept and "from torch import nn" in kept
    assert "EPS = 1e-8" in kept and "    return t / (t.norm() + EPS)" in kept
    assert not any("wandb" in line or "UNUSED" in line or "range(10**9)" in line or "__main__" in line for line in kept)
    # Line numbers are the file's.
    assert side.source.splitlines()[18] == SCRIPT.splitlines()[18]
    assert side.watch == subjects.Watch((19, 19), ("y",), "assign", sources=("x",))
    assert side.fn_span == (18, 21)


def test_the_fixed_side_has_the_suggestion_and_its_watch_follows_it() -> None:
    fix = Suggestion(19, 19, "        y = x.float()\n        y = y.clone()\n")
    subject = subjects.build(_finding(19, fix), SCRIPT)
    assert subject.fixed is not None
    assert "        y = y.clone()" in subject.fixed.source.splitlines()
    assert subject.fixed.watch.span == (19, 20)
    assert subject.fixed.fn_span == (18, 22)


def test_watch_kinds() -> None:
    assert subjects.build(_finding(20), SCRIPT).original.watch.kind == "write"
    assert subjects.build(_finding(21), SCRIPT).original.watch.kind == "return"
    side = subjects.build(_finding(25), SCRIPT).original
    assert side.target == ("train",) and side.watch.names == ("best",)


def test_module_level_code_is_not_runnable() -> None:
    with pytest.raises(subjects.NotRunnable, match="module-level code"):
        subjects.build(_finding(29), SCRIPT)


def test_a_fix_that_does_not_parse_leaves_only_the_original() -> None:
    subject = subjects.build(_finding(19, Suggestion(19, 19, "        y = (\n")), SCRIPT)
    assert subject.fixed is None and "cannot be run" in subject.no_fix


def test_recipes_from_rules_and_categories() -> None:
    assert recipes.recipes_for("numpy-bridge", ("raises",)) == ("raises",)
    assert recipes.recipes_for("inplace-autograd", ("backward", "silent-grad")) == ("backward", "silent-grad")
    assert recipes.recipes_for("stale-snapshot", ("no-such-recipe",)) == ("snapshot",)
    assert all(recipes.recipes_for(c.value) for c in Category)
    for rule in all_rules():
        if not rule.observable:
            continue  # verified as not-run on purpose (Rule.observable)
        assert all(name in recipes.names() for name in rule.recipes), f"{rule.code} declares an unknown recipe in {rule.recipes!r}"
    assert set(recipes.names()) == {name for names in recipes.CATEGORY_RECIPES.values() for name in names} | {"copy-bytes"}
    assert all(r.needs and type(r).decide is not Recipe.decide for r in recipes.registry().values())


def _o(device: str, status: str, evidence: str, recipe: str = "") -> DeviceVerdict:
    return DeviceVerdict(device, verdict.Decision(status, evidence, recipe))


def test_devices_that_agree_are_named_together() -> None:
    v = combine([_o("cpu", "confirmed", "seen"), _o("cuda", "confirmed", "seen too")])
    assert (v.status, v.device, v.evidence) == (Status.CONFIRMED, "cpu+cuda", "seen")


def test_a_fix_wrong_on_one_device_is_refuted_and_the_difference_is_said() -> None:
    v = combine([
        _o("cpu", "refuted", "the fix's result `result` shares memory with input `x`", "fix"),
        _o("cuda", "confirmed", "the fix copies 0 B instead of 128 B per call"),
    ])
    assert v.status is Status.REFUTED and v.device == "cpu"
    assert "on cuda confirmed: the fix copies 0 B" in v.evidence


def test_a_problem_seen_on_one_device_only_is_confirmed_there() -> None:
    v = combine([_o("cpu", "refuted", "ran without error"), _o("cuda", "confirmed", "the original raised TypeError")])
    assert v.status is Status.CONFIRMED and v.device == "cuda"
    assert "on cpu refuted: ran without error" in v.evidence


def test_evidence_numbers() -> None:
    assert base.size(4 << 20) == "4.0 MiB" and base.size(128) == "128 B"
    assert base.num(0.0312345) == "0.0312" and base.num(1.0) == "1"
    assert base.short_error("RuntimeError: boom. Hint: enable anomaly detection") == "RuntimeError: boom."
