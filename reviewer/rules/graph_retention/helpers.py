"""What the graph-retention rules share."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.rewrite import atom, chain


def detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    return chain(atom(expr), "detach")
