"""What the LLM stage accepts from a model's answer, and how it anchors and merges it."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from review_copies.llm.merge import merge
from review_copies.llm.placement import place
from review_copies.llm.validate import AnswerError, Shown, check_answer, check_finding, parse_answer, schema_problem
from review_copies.model.findings import Category, Finding, Severity
from review_copies.review.hunks import TensorHunk

TEXT = """import copy
import torch


def fit(model, opt, loader):
    best = None
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()
        best = model.state_dict()
    return best
"""
LINES = TEXT.splitlines()
HUNK = TensorHunk(
    path="pkg/train.py",
    scope_kind="function",
    scope_name="fit",
    start=5,
    end=12,
    changed=(11,),
    lines=tuple((n, LINES[n - 1]) for n in range(5, 13)),
    imports=((1, "import copy"), (2, "import torch")),
)
SHOWN = Shown(hunks=(HUNK,), texts={"pkg/train.py": TEXT}, categories=frozenset(Category))
QUOTE = "        best = model.state_dict()"


def finding(**overrides):
    raw = {
        "path": "pkg/train.py",
        "line": 11,
        "end_line": 11,
        "category": "stale-snapshot",
        "severity": "warning",
        "message": "`best` aliases the live weights; deep-copy the state_dict.",
        "code": QUOTE,
        "fix": {"start_line": 11, "end_line": 11, "replacement": "        best = copy.deepcopy(model.state_dict())\n"},
        "probe": None,
    }
    raw.update(overrides)
    return raw


def test_a_good_finding_becomes_an_llm_finding_with_its_fix() -> None:
    result = check_finding(finding(), SHOWN)
    assert isinstance(result, Finding)
    assert (result.line, result.end_line, result.rule, result.source, result.severity) == (11, 11, "llm-stale-snapshot", "llm", Severity.WARNING)
    assert result.code == QUOTE and result.column == 9
    assert result.suggestion is not None and result.suggestion.replacement == "        best = copy.deepcopy(model.state_dict())\n"
    assert result.suggestion.original == QUOTE + "\n"


@pytest.mark.parametrize("claimed", [8, 12, 5])
def test_a_line_number_the_quote_contradicts_is_corrected_inside_the_hunk(claimed: int) -> None:
    fix = {"start_line": claimed, "end_line": claimed, "replacement": "        best = copy.deepcopy(model.state_dict())\n"}
    result = check_finding(finding(line=claimed, end_line=claimed, fix=fix), SHOWN)
    assert isinstance(result, Finding)
    assert (result.line, result.end_line) == (11, 11)
    assert result.suggestion is not None and (result.suggestion.start_line, result.suggestion.end_line) == (11, 11)


def test_the_quote_anchors_without_its_indentation_or_with_the_number_column() -> None:
    assert place(9, 9, "best = model.state_dict()", [HUNK]).line == 11
    assert place(9, 9, ">11|         best = model.state_dict()", [HUNK]).line == 11
    assert place(11, 11, "model.state_dict()", [HUNK]).line == 11


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"line": 1, "end_line": 1, "code": "import copy"}, "line 1 is outside the hunks shown"),
        ({"line": 40, "end_line": 40, "code": None}, "line 40 is outside the hunks shown"),
        ({"code": "        best = model.parameters()"}, "the quoted code is not in the hunk"),
        ({"line": 8, "end_line": 8, "code": "        loss = model(x).sum()", "fix": None}, "not lines this change added or modified"),
        ({"category": "tensor-leak"}, "unknown category 'tensor-leak'"),
        ({"severity": "critical"}, "'severity' must be info, warning or error"),
        ({"line": "11"}, "'line' must be a positive integer"),
        ({"message": ""}, "'message' must be a non-empty string"),
        ({"path": "pkg/other.py"}, "'pkg/other.py' is not one of the files shown"),
        ({"fix": {"start_line": 11, "end_line": 11}}, "'fix.replacement' must be a string"),
        ({"message": "…"}, "'message' says nothing"),
        ({"message": "message"}, "'message' says nothing"),
        ({"message": "TODO"}, "'message' says nothing"),
    ],
)
def test_each_kind_of_bad_finding_is_dropped_with_its_reason(overrides: dict, reason: str) -> None:
    result = check_finding(finding(**overrides), SHOWN)
    assert not isinstance(result, Finding), "a bad finding was accepted"
    assert reason in result.reason
    assert result.finding.source == "llm"


@pytest.mark.parametrize(
    "fix",
    [
        {"start_line": 11, "end_line": 11, "replacement": "        best = copy.deepcopy(model.state_dict()\n"},  # does not parse
        {"start_line": 10, "end_line": 11, "replacement": "        best = copy.deepcopy(model.state_dict())\n"},  # outside the finding's lines
        {"start_line": 11, "end_line": 11, "replacement": "best = copy.deepcopy(model.state_dict())\n"},  # changes the indentation
    ],
)
def test_a_bad_fix_leaves_the_finding_without_a_suggestion(fix: dict) -> None:
    """The finding stands on its own (issue 16): only its fix is refused, and counted."""
    result = check_finding(finding(fix=fix), SHOWN)
    assert isinstance(result, Finding) and result.suggestion is None and result.message.startswith("`best` aliases the live weights")
    content = json.dumps({"findings": [finding(fix=fix)]})
    assert check_answer(content, SHOWN).fixes_dropped == 1


def test_a_category_the_configuration_left_out_is_dropped() -> None:
    shown = Shown(SHOWN.hunks, SHOWN.texts, frozenset({Category.COPY_CONSTRUCT}))
    result = check_finding(finding(), shown)
    assert not isinstance(result, Finding) and "was not asked for" in result.reason


def test_a_copied_number_column_and_a_missing_newline_are_taken_out_of_the_fix() -> None:
    result = check_finding(finding(fix={"start_line": 11, "end_line": 11, "replacement": ">11|         best = copy.deepcopy(model.state_dict())"}), SHOWN)
    assert isinstance(result, Finding) and result.suggestion is not None
    assert result.suggestion.replacement == "        best = copy.deepcopy(model.state_dict())\n"


def test_a_fix_that_changes_nothing_leaves_the_finding_without_a_suggestion() -> None:
    result = check_finding(finding(fix={"start_line": 11, "end_line": 11, "replacement": QUOTE + "\n"}), SHOWN)
    assert isinstance(result, Finding) and result.suggestion is None


def test_a_probe_that_is_not_python_is_left_out_but_the_finding_stays() -> None:
    checked = check_answer(json.dumps({"findings": [finding(probe="def broken(:\n")]}), SHOWN)
    assert len(checked.findings) == 1 and checked.findings[0].probe == ""
    assert checked.probes_dropped == 1


def test_one_answer_keeps_its_good_findings_and_drops_the_bad_and_the_repeated() -> None:
    content = json.dumps({"findings": [finding(), finding(category="nope"), finding(line=9, end_line=9)]})
    checked = check_answer(content, SHOWN)
    assert [f.line for f in checked.findings] == [11]
    assert sorted(d.reason.split(" (")[0] for d in checked.dropped) == ["the answer gives this finding twice", "unknown category 'nope'"]
    assert checked.corrected == 0


@pytest.mark.parametrize(
    "content",
    ['```json\n{"findings": []}\n```', '<think>the user wants JSON</think>\n{"findings": []}', '  {"findings": []}  '],
)
def test_usual_wrappers_around_the_json_are_taken_off(content: str) -> None:
    assert parse_answer(content) == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"findings": [', "not valid JSON"),
        ("Here are my findings: none.", "not valid JSON"),
        ("", "the answer is empty"),
        ('[{"path": "a.py"}]', "must be an object with a list 'findings'"),
        ('{"results": []}', "must be an object with a list 'findings'"),
    ],
)
def test_an_unusable_answer_is_an_error_with_a_reason(content: str, reason: str) -> None:
    with pytest.raises(AnswerError, match=reason):
        parse_answer(content)


def test_the_schema_file_and_the_checker_agree() -> None:
    schema = json.loads(resources.files("review_copies.prompts").joinpath("answer.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    good = finding()
    jsonschema.validate({"findings": [good]}, schema)
    assert schema_problem(good) is None
    for bad in (finding(severity="critical"), finding(line="11"), finding(fix={"start_line": 1}), finding(category="tensor-leak")):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"findings": [bad]}, schema)
        assert schema_problem(bad) is not None or bad["category"] not in {c.value for c in Category}


def _static(category: Category, message: str) -> Finding:
    return Finding("pkg/train.py", 11, 11, category, "RC401", Severity.WARNING, message, code=QUOTE)


def test_the_same_problem_from_a_rule_and_the_llm_is_one_finding_with_the_better_message() -> None:
    llm = check_finding(finding(), SHOWN)
    assert isinstance(llm, Finding)
    terse = _static(Category.STALE_SNAPSHOT, "A reference, not a copy.")
    merged = merge([terse], [llm])
    assert merged.merged == 1 and len(merged.findings) == 1
    kept = merged.findings[0]
    assert (kept.rule, kept.source, kept.suggestion) == ("RC401", "static", None)
    assert kept.message == llm.message

    thorough = _static(Category.STALE_SNAPSHOT, "`best = model.state_dict()` keeps the live tensors of `model`; use `copy.deepcopy`.")
    assert merge([thorough], [llm]).findings[0].message == thorough.message


def test_a_different_problem_on_the_same_line_stays_a_second_finding() -> None:
    llm = check_finding(finding(), SHOWN)
    assert isinstance(llm, Finding)
    merged = merge([_static(Category.GRAPH_RETENTION, "keeps the graph")], [llm])
    assert merged.merged == 0 and [f.source for f in merged.findings] == ["static", "llm"]


def test_prose_around_the_json_object_is_ignored() -> None:
    """Small local models write a sentence before or after the object (issue 16)."""
    body = json.dumps({"findings": [finding()]})
    for content in (body + "\n\nI hope this helps! Let me know if you need more.", "Here is my review:\n" + body + "\nDone."):
        assert len(check_answer(content, SHOWN).findings) == 1
