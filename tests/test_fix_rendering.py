"""Fixes are made in the statement that holds the finding, and come out exactly as if the
whole file had been remade: nested blocks, continuation lines, multi-line strings, tabs."""

from __future__ import annotations

import libcst as cst
import pytest

from review_copies.analysis.parse import parse
from review_copies.review import fixes

CASES = {
    "nested block": (
        "import torch\n\n\nclass M:\n    def f(self, x: torch.Tensor):\n        if x.any():\n            y = torch.tensor(x)\n            return y\n",
        "x",
    ),
    "continuation lines": (
        "import torch\n\n\ndef f(x):\n    y = torch.stack(\n        [torch.tensor(x),\n  x],  # odd indentation\n    )\n    return y\n",
        "x",
    ),
    "multi-line string in the statement": (
        'import torch\n\n\ndef f(x):\n    if True:\n        y = (torch.tensor(x), """first\nsecond line at column 0\n    third""")\n    return y\n',
        "x",
    ),
    "tabs": ("import torch\n\n\ndef f(x):\n\tif x:\n\t\ty = torch.tensor(x)\n\treturn y\n", "x"),
    "whole statement replaced": ("import torch\n\n\ndef f(x):\n    for i in range(3):\n        x.add_(1)\n    return x\n", None),
}


def _targets(module: cst.Module, wanted: str | None) -> tuple[cst.CSTNode, cst.CSTNode]:
    """The first `torch.tensor(x)` call and its fix, or the first `x.add_(1)` line and a block."""
    class Find(cst.CSTVisitor):
        found: cst.CSTNode | None = None

        def visit_Call(self, node: cst.Call) -> None:
            if self.found is None and wanted and cst.Module([]).code_for_node(node.func) == "torch.tensor":
                self.found = node

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            if self.found is None and not wanted and "add_" in cst.Module([]).code_for_node(node):
                self.found = node

    finder = Find()
    module.visit(finder)
    assert finder.found is not None
    if wanted:
        return finder.found, cst.parse_expression(f"{wanted}.detach().clone()")
    block = cst.parse_module("with torch.no_grad():\n    x.add_(1)\n").body[0]
    return finder.found, block


@pytest.mark.parametrize("name", list(CASES))
def test_the_local_fix_is_the_whole_module_fix(name: str) -> None:
    text, wanted = CASES[name]
    parsed = parse("m.py", text)
    old, new = _targets(parsed.module, wanted)
    whole = fixes.line_suggestion(text, parsed.module.deep_replace(old, new).code)
    assert whole is not None
    assert fixes.render(parsed, old, new) == whole
    assert fixes._render_in_statement(parsed, old, new) in (whole, fixes._UNSURE)
