"""SARIF 2.1.0, for code scanning (github/codeql-action/upload-sarif) and other viewers."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from review_copies import __version__
from review_copies.model.findings import CATEGORY_SUMMARY, Category, Finding, Severity
from review_copies.model.report import Report
from review_copies.output.common import plain_explanation, verdict_line
from review_copies.output.context import RenderContext
from review_copies.rules import Rule

NAME = "sarif"

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_entry(rule: type[Rule]) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": rule.why() or rule.summary()},
        "help": {"text": plain_explanation(rule), "markdown": rule.doc()},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"category": rule.category.value, "tags": ["pytorch", rule.category.value]},
    }


def _llm_rule_entry(rule_id: str, category: Category) -> dict[str, Any]:
    text = f"Found by the LLM reviewer: {CATEGORY_SUMMARY[category]}."
    return {
        "id": rule_id,
        "name": f"llm-{category.value}",
        "shortDescription": {"text": text},
        "fullDescription": {"text": text},
        "help": {"text": text, "markdown": text},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"category": category.value, "tags": ["pytorch", category.value, "llm"]},
    }


def artifact_uri(path: str) -> str:
    """A relative URI reference (RFC 3986), as SARIF requires: a space is `%20`, a `%` is
    `%25`, and a `#` or `?` does not end the path."""
    return quote(path, safe="/")


def _result(f: Finding, index: int) -> dict[str, Any]:
    location = {
        "physicalLocation": {
            "artifactLocation": {"uri": artifact_uri(f.path), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": f.line, "endLine": f.end_line, "startColumn": max(f.column, 1)},
        }
    }
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": _LEVEL[f.severity],
        "message": {"text": f"{f.message} ({verdict_line(f)})"},
        "locations": [location],
        "partialFingerprints": {"reviewCopies/v1": f.fingerprint},
        "properties": {
            "category": f.category.value,
            "source": f.source,
            "verification": {"status": f.verification.status.value, "device": f.verification.device, "evidence": f.verification.evidence},
        },
    }
    if f.suggestion is not None:
        s = f.suggestion
        result["fixes"] = [
            {
                "description": {"text": f"Replace lines {s.start_line}-{s.end_line}"},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": artifact_uri(f.path), "uriBaseId": "%SRCROOT%"},
                        "replacements": [
                            {
                                "deletedRegion": {"startLine": s.start_line, "startColumn": 1, "endLine": s.end_line + 1, "endColumn": 1},
                                "insertedContent": {"text": s.replacement},
                            }
                        ],
                    }
                ],
            }
        ]
    return result


def as_dict(report: Report, ctx: RenderContext) -> dict[str, Any]:
    entries = [_rule_entry(r) for r in ctx.rules]
    index = {r.code: i for i, r in enumerate(ctx.rules)}
    for f in report.findings:
        if f.rule not in index:
            from review_copies.rules import rule_by_code

            known = rule_by_code(f.rule)
            index[f.rule] = len(entries)
            entries.append(_rule_entry(known) if known is not None else _llm_rule_entry(f.rule, f.category))
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "review-copies",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": "https://github.com/review-copies/review-copies",
                        "rules": entries,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(f, index[f.rule]) for f in report.findings],
                "properties": {"coverage": list(report.coverage)},
            }
        ],
    }


def render(report: Report, ctx: RenderContext) -> str:
    return json.dumps(as_dict(report, ctx), indent=2, ensure_ascii=False) + "\n"
