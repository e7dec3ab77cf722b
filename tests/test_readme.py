"""The README's first two commands stay true: CI runs the test one, the demo one works."""

from __future__ import annotations

import re
import shlex

from tests.conftest import ROOT, run_process


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```\n(.+?)\n```", text)[:2]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    _demo, tests = _commands()
    assert "pytest" in tests and "torch==2.13.0" in tests
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_demo_review_runs_and_finds_the_bugs() -> None:
    demo, _ = _commands()
    review = demo.split(" && ")[-1]
    argv = shlex.split(review)
    assert argv[0] == "review-copies"
    result = run_process(*argv[1:], "--no-sandbox", "--format", "json", cwd=ROOT)
    assert result.code == 0, result.err
    categories = {f["category"] for f in result.json["findings"]}
    assert {"copy-construct", "numpy-bridge"} <= categories
