"""Read a JSON report (contract section 3) saved by another job, as untrusted data.

In the fork-safe setup the report comes from a job that ran on the pull request's code,
which its author controls, workflow file included. Nothing in it is believed without a
check: every field is validated and clipped, static findings are posted only when the
project's own rules find them again in the head commit (their message and fix come from
that re-run, not from the report), and fixes of other findings are never offered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from review_copies.github.diff_positions import LineReader
from review_copies.model.errors import UsageError
from review_copies.model.findings import Category, Dropped, Finding, Note, Severity, Status, Suggestion, Verification
from review_copies.model.report import LLMStats, Report, SandboxStats, Stats
from review_copies.review.engine import FileJob, review_file
from review_copies.rules import rule_by_code

MAX_REPORT_BYTES = 20 * 1024 * 1024
MAX_SPAN = 500
_RULE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_STAT_INTS = ("files", "python_files", "hunks", "tensor_hunks", "llm_calls", "prompt_tokens", "completion_tokens", "sandbox_runs")


def load_report(path: str) -> tuple[Report, int]:
    """The report, and how many of its entries were malformed and left out."""
    file = Path(path)
    try:
        if file.stat().st_size > MAX_REPORT_BYTES:
            raise UsageError(f"the saved report {path} is larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB")
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the saved report {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"the saved report {path} is not valid JSON") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("findings"), list):
        raise UsageError(f"the saved report {path} is not a review-copies JSON report (version 1)")
    findings = [parse_finding(item) for item in data["findings"]]
    dropped_raw = data.get("dropped") if isinstance(data.get("dropped"), list) else []
    dropped = [_dropped(item) for item in dropped_raw]
    bad = sum(1 for f in findings if f is None) + sum(1 for d in dropped if d is None)
    report = Report(
        findings=[f for f in findings if f is not None],
        dropped=[d for d in dropped if d is not None],
        stats=_stats(data.get("stats")),
    )
    return report, bad


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _path(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > 1000 or value.startswith("/") or "\\" in value:
        return None
    parts = value.split("/")
    return None if any(p in ("", ".", "..") for p in parts) or any(ord(ch) < 32 for ch in value) else value


def parse_finding(item: Any) -> Finding | None:
    if not isinstance(item, dict):
        return None
    path, line, end = _path(item.get("path")), _int(item.get("line")), _int(item.get("end_line"))
    rule, message = item.get("rule"), _text(item.get("message"), 6000)
    if path is None or line is None or end is None or not 1 <= line <= end or end - line > MAX_SPAN:
        return None
    if not isinstance(rule, str) or not _RULE.match(rule) or not message or item.get("source") not in ("static", "llm"):
        return None
    try:
        category, severity = Category(item.get("category")), Severity(item.get("severity"))
        verification = _verification(item.get("verification"))
    except ValueError:
        return None
    if verification is None or verification.status is Status.REFUTED:
        return None
    suggestion = _suggestion(item.get("suggestion"))
    return Finding(path, line, end, category, rule, severity, message, source=item["source"], suggestion=suggestion, verification=verification)


def _verification(value: Any) -> Verification | None:
    if not isinstance(value, dict):
        return None
    device = value.get("device")
    if device is not None and not (isinstance(device, str) and re.fullmatch(r"[A-Za-z0-9:_-]{1,32}", device)):
        return None
    return Verification(Status(value.get("status")), device, _text(value.get("evidence"), 6000) or "")


def _suggestion(value: Any) -> Suggestion | None:
    if not isinstance(value, dict):
        return None
    start, end, replacement = _int(value.get("start_line")), _int(value.get("end_line")), _text(value.get("replacement"), 50_000)
    if start is None or end is None or replacement is None or not 1 <= start <= end:
        return None
    return Suggestion(start, end, replacement)


def _dropped(item: Any) -> Dropped | None:
    reason = _text(item.get("reason"), 500) if isinstance(item, dict) else None
    finding = parse_finding({**item, "verification": {"status": "not-run"}}) if reason and isinstance(item, dict) else None
    return Dropped(finding, reason) if finding is not None and reason else None


def _stats(value: Any) -> Stats:
    if not isinstance(value, dict):
        return Stats()
    counts = {key: number for key in _STAT_INTS if (number := _int(value.get(key))) is not None and number >= 0}
    seconds = value.get("seconds")
    skipped = value.get("skipped_files")
    words = {key: word for key in ("llm", "sandbox") if (word := _text(value.get(key), 60)) and re.fullmatch(r"[A-Za-z0-9._:/-]+", word)}
    return Stats(
        files=counts.get("files", 0),
        python_files=counts.get("python_files", 0),
        hunks=counts.get("hunks", 0),
        tensor_hunks=counts.get("tensor_hunks", 0),
        seconds=float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0 else 0.0,
        skipped={k[:40]: v for k, v in skipped.items() if isinstance(k, str) and _int(v) is not None and v >= 0} if isinstance(skipped, dict) else {},
        llm=LLMStats(
            model=words.get("llm", "off"),
            calls=counts.get("llm_calls", 0),
            prompt_tokens=counts.get("prompt_tokens", 0),
            completion_tokens=counts.get("completion_tokens", 0),
        ),
        sandbox=SandboxStats(state=words.get("sandbox", "off"), runs=counts.get("sandbox_runs", 0)),
    )


# ------------------------------------------------------------------ re-deriving


def rederive(report: Report, read_lines: LineReader) -> tuple[Report, int]:
    """The findings worth posting, rebuilt from the head commit; returns how many of the
    report's findings did not hold up."""
    reruns: dict[tuple[str, str], list[Finding]] = {}
    kept: list[Finding] = []
    for f in report.findings:
        lines = read_lines(f.path)
        if lines is None or f.end_line > len(lines):
            continue
        rebuilt = _static(f, lines, reruns) if f.source == "static" else _foreign(f, lines)
        if rebuilt is not None:
            kept.append(rebuilt)
    lost = len(report.findings) - len(kept)
    notes = list(report.notes)
    if lost:
        notes.append(Note(f"{lost} finding{'s' if lost != 1 else ''} of the saved report did not hold up against the head commit and were not posted"))
    return Report(findings=kept, dropped=report.dropped, notes=notes, stats=report.stats, coverage=report.coverage), lost


def _static(f: Finding, lines: Sequence[str], reruns: dict[tuple[str, str], list[Finding]]) -> Finding | None:
    if rule_by_code(f.rule) is None:
        return None
    key = (f.path, f.rule)
    if key not in reruns:
        result = review_file(FileJob(path=f.path, text="".join(lines), changed=None, rule_codes=(f.rule,)))
        reruns[key] = result.findings
    same = next((g for g in reruns[key] if (g.line, g.end_line) == (f.line, f.end_line)), None)
    return same.with_verification(f.verification) if same is not None else None


def _foreign(f: Finding, lines: Sequence[str]) -> Finding:
    """An LLM finding: its text is shown (defused when rendered), its fix is not offered."""
    code = "\n".join(ln.rstrip("\r\n") for ln in lines[f.line - 1 : f.end_line])
    return replace(f, code=code, suggestion=None)


def workflow_run_head(payload: Mapping[str, Any]) -> tuple[str, str | None]:
    """(head sha, head repository) of the run that saved the report, from GitHub's event."""
    run = payload.get("workflow_run")
    if not isinstance(run, dict) or not isinstance(run.get("head_sha"), str):
        raise UsageError("post-report runs on a workflow_run event: the event names no workflow run")
    repo = run.get("head_repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return run["head_sha"], name if isinstance(name, str) else None
