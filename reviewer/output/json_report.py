"""The JSON report of contract section 3."""

from __future__ import annotations

import json

from review_copies.model.report import Report
from review_copies.output.context import RenderContext

NAME = "json"


def as_dict(report: Report) -> dict:
    return {
        "version": 1,
        "findings": [f.to_json() for f in report.findings],
        "dropped": [d.to_json() for d in report.dropped],
        "stats": report.stats.to_json(),
        "notes": [{"path": n.path, "message": n.message} for n in report.notes],
        "coverage": list(report.coverage),
    }


def render(report: Report, ctx: RenderContext) -> str:
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False) + "\n"
