"""Score `review-copies` on the labeled corpus: precision, recall and F1 per category.

    python benchmarks/score.py [--corpus DIR] [--sandbox] [--json OUT] [--jobs N] [--cli PATH] [--only GLOB]

Every case of the corpus (``benchmarks/corpus/<id>/`` with ``before/``, ``after/`` and
``case.json``) becomes a real two-commit git repository in a temporary folder; the installed
CLI reviews it (``review-copies --repo R --base HEAD~1 --head HEAD --offline --format json``,
plus ``--no-sandbox`` unless ``--sandbox``), and each finding is matched to a label: same path,
same category, and the finding's line is the label's line or one of its ``lines``. One finding
matches at most one label, and one label at most one finding; a second finding on a label
already matched is a false positive ("duplicate").

The scorer is a measurement: it exits 0 whatever the scores, and 2 only when the CLI itself
fails on a case (the failing cases are named on standard error).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

CATEGORIES: tuple[str, ...] = (
    "alias-mutation",
    "inplace-autograd",
    "graph-retention",
    "stale-snapshot",
    "copy-construct",
    "numpy-bridge",
    "redundant-copy",
)
STATUSES: tuple[str, ...] = ("confirmed", "inconclusive", "not-run", "refuted")
DEFAULT_CORPUS = Path(__file__).resolve().parent / "corpus"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Label:
    path: str
    line: int
    category: str
    lines: tuple[int, ...] = ()

    def accepts(self, path: str, line: int, category: str) -> bool:
        return path == self.path and category == self.category and (line == self.line or line in self.lines)


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    description: str
    labels: tuple[Label, ...]
    dir: Path

    @property
    def before(self) -> Path:
        return self.dir / "before"

    @property
    def after(self) -> Path:
        return self.dir / "after"


def load_case(case_dir: Path) -> Case:
    data = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    labels = tuple(
        Label(path=lab["path"], line=int(lab["line"]), category=lab["category"], lines=tuple(int(n) for n in lab.get("lines", ())))
        for lab in data.get("labels", [])
    )
    return Case(id=data["id"], kind=data["kind"], description=data.get("description", ""), labels=labels, dir=case_dir)


def load_corpus(corpus: Path) -> list[Case]:
    return [load_case(d) for d in sorted(corpus.iterdir()) if (d / "case.json").is_file()]


# ----------------------------------------------------------------------------- git


def _clear_worktree(root: Path) -> None:
    for entry in root.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _commit_tree(repo: git.Repo, root: Path, tree: Path, message: str) -> None:
    _clear_worktree(root)
    if tree.is_dir():
        # copy, not copy2: preserved mtimes plus equal sizes would let git's stat cache
        # take a changed file for unchanged; and the index is rebuilt from scratch anyway.
        shutil.copytree(tree, root, dirs_exist_ok=True, ignore=_IGNORED, copy_function=shutil.copy)
    index = root / ".git" / "index"
    if index.exists():
        index.unlink()
    repo.git.add("-A")
    repo.git.commit("--allow-empty", "--no-verify", "-q", "-m", message)


def build_repo(case: Case, dest: Path) -> Path:
    """A repository at `dest` whose HEAD~1 is `before/` (empty when absent) and HEAD is `after/`."""
    dest.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(dest)
    with repo.config_writer() as cfg:
        cfg.set_value("user", "name", "corpus")
        cfg.set_value("user", "email", "corpus@example.invalid")
        cfg.set_value("commit", "gpgsign", "false")
        cfg.set_value("core", "autocrlf", "false")
    _commit_tree(repo, dest, case.before, "before")
    _commit_tree(repo, dest, case.after, "after")
    repo.close()
    return dest


def changed_lines(repo_dir: Path) -> dict[str, set[int]]:
    """Lines of the new files that `git diff HEAD~1 HEAD` marks as added, per path."""
    repo = git.Repo(repo_dir)
    text = repo.git.diff("-U0", "--no-color", "--no-renames", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "HEAD~1", "HEAD")
    repo.close()
    out: dict[str, set[int]] = {}
    path: str | None = None
    for line in text.splitlines():
        if line.startswith("+++ "):
            target = line[4:]
            path = None if target == "/dev/null" else target[2:]
            if path is not None:
                out.setdefault(path, set())
        elif path is not None and (m := _HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            out[path].update(range(start, start + count))
    return out


# ----------------------------------------------------------------------------- matching


@dataclass
class Hit:
    """One finding (or refuted dropped entry) of the CLI, classified against the labels."""

    case: str
    path: str
    line: int
    category: str
    rule: str
    message: str
    status: str
    tp: bool
    note: str = ""


@dataclass
class Miss:
    case: str
    label: Label


@dataclass
class CaseResult:
    case: str
    tp: list[Hit] = field(default_factory=list)
    fp: list[Hit] = field(default_factory=list)
    fn: list[Miss] = field(default_factory=list)
    refuted: list[Hit] = field(default_factory=list)


def _status(entry: dict[str, Any]) -> str:
    verification = entry.get("verification") or {}
    return str(verification.get("status") or "not-run")


def _hit(case: Case, entry: dict[str, Any], tp: bool, note: str = "") -> Hit:
    return Hit(
        case=case.id,
        path=str(entry.get("path", "")),
        line=int(entry.get("line", 0)),
        category=str(entry.get("category", "")),
        rule=str(entry.get("rule", "")),
        message=str(entry.get("message", "")),
        status=_status(entry),
        tp=tp,
        note=note,
    )


def _is_refuted(entry: dict[str, Any]) -> bool:
    return _status(entry) == "refuted" or "refut" in str(entry.get("reason", "")).lower()


def match_case(case: Case, report: dict[str, Any]) -> CaseResult:
    result = CaseResult(case=case.id)
    matched: set[int] = set()
    findings = sorted(report.get("findings", []), key=lambda f: (str(f.get("path", "")), int(f.get("line", 0))))
    for finding in findings:
        path, line, category = str(finding.get("path", "")), int(finding.get("line", 0)), str(finding.get("category", ""))
        fits = [i for i, lab in enumerate(case.labels) if lab.accepts(path, line, category)]
        free = [i for i in fits if i not in matched]
        if free:
            matched.add(free[0])
            result.tp.append(_hit(case, finding, True))
        else:
            result.fp.append(_hit(case, finding, False, "duplicate" if fits else ""))
    result.fn = [Miss(case.id, lab) for i, lab in enumerate(case.labels) if i not in matched]
    for entry in report.get("dropped", []):
        if _is_refuted(entry):
            path, line, category = str(entry.get("path", "")), int(entry.get("line", 0)), str(entry.get("category", ""))
            tp = any(lab.accepts(path, line, category) for lab in case.labels)
            hit = _hit(case, entry, tp, str(entry.get("reason", "")))
            hit.status = "refuted"
            result.refuted.append(hit)
    return result


# ----------------------------------------------------------------------------- metrics


@dataclass
class Score:
    labels: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else None

    def as_dict(self) -> dict[str, Any]:
        return {"labels": self.labels, "tp": self.tp, "fp": self.fp, "fn": self.fn, "precision": self.precision, "recall": self.recall, "f1": self.f1}


def aggregate(cases: Sequence[Case], results: Sequence[CaseResult]) -> dict[str, Score]:
    scores = {c: Score() for c in (*CATEGORIES, "overall")}
    for case in cases:
        for lab in case.labels:
            scores.setdefault(lab.category, Score()).labels += 1
            scores["overall"].labels += 1
    for res in results:
        for hit in res.tp:
            scores.setdefault(hit.category, Score()).tp += 1
            scores["overall"].tp += 1
        for hit in res.fp:
            scores.setdefault(hit.category, Score()).fp += 1
            scores["overall"].fp += 1
        for miss in res.fn:
            scores.setdefault(miss.label.category, Score()).fn += 1
            scores["overall"].fn += 1
    return scores


def verdicts(results: Sequence[CaseResult]) -> dict[str, dict[str, Counter[str]]]:
    """category -> {"tp": Counter(status), "fp": Counter(status)}, refuted dropped entries included."""
    out: dict[str, dict[str, Counter[str]]] = {}
    for res in results:
        for hit in (*res.tp, *res.fp, *res.refuted):
            for cat in (hit.category, "overall"):
                out.setdefault(cat, {"tp": Counter(), "fp": Counter()})["tp" if hit.tp else "fp"][hit.status] += 1
    return out


# ----------------------------------------------------------------------------- running


class CliFailure(Exception):
    pass


def default_cli() -> list[str]:
    local = Path(sys.executable).parent / "review-copies"
    if local.exists():
        return [str(local)]
    found = shutil.which("review-copies")
    if found:
        return [found]
    return [sys.executable, "-m", "review_copies"]


def run_case(case: Case, cli: Sequence[str], sandbox: bool, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"rc-{case.id}-") as tmp:
        repo = build_repo(case, Path(tmp) / "repo")
        cmd = [*cli, "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--format", "json"]
        if not sandbox:
            cmd.append("--no-sandbox")
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "REVIEW_COPIES_DEBUG")}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp, check=False)
        except subprocess.TimeoutExpired as exc:
            raise CliFailure(f"{case.id}: the CLI ran past {timeout:.0f} s") from exc
    if proc.returncode not in (0, 1):
        raise CliFailure(f"{case.id}: the CLI exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise CliFailure(f"{case.id}: the CLI did not print a JSON report ({exc}): {proc.stdout[:200]!r}") from exc
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        raise CliFailure(f"{case.id}: the report has no findings list")
    return report


# ----------------------------------------------------------------------------- printing


def _fmt(x: float | None) -> str:
    return "    -" if x is None else f"{x:5.2f}"


def _source_line(case_dir: Path, path: str, line: int) -> str:
    try:
        return (case_dir / "after" / path).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""


def format_table(scores: dict[str, Score]) -> str:
    rows = [f"{'category':<18} {'labels':>6} {'tp':>4} {'fp':>4} {'fn':>4} {'prec':>5} {'rec':>5} {'f1':>5}"]
    for cat in (*CATEGORIES, *sorted(set(scores) - {*CATEGORIES, "overall"}), "overall"):
        s = scores[cat]
        if cat == "overall":
            rows.append("-" * len(rows[0]))
        rows.append(f"{cat:<18} {s.labels:>6} {s.tp:>4} {s.fp:>4} {s.fn:>4} {_fmt(s.precision)} {_fmt(s.recall)} {_fmt(s.f1)}")
    return "\n".join(rows)


def format_verdicts(table: dict[str, dict[str, Counter[str]]]) -> str:
    head = f"{'category':<18} " + " ".join(f"tp:{s:<12}" for s in STATUSES) + " " + " ".join(f"fp:{s:<12}" for s in STATUSES)
    rows = [head]
    for cat in (*CATEGORIES, "overall"):
        counts = table.get(cat, {"tp": Counter(), "fp": Counter()})
        rows.append(f"{cat:<18} " + " ".join(f"{counts['tp'][s]:<15}" for s in STATUSES) + " " + " ".join(f"{counts['fp'][s]:<15}" for s in STATUSES))
    overall = table.get("overall", {"tp": Counter(), "fp": Counter()})
    n_tp, n_fp = sum(overall["tp"].values()), sum(overall["fp"].values())
    if n_tp:
        rows.append(
            f"true positives confirmed: {overall['tp']['confirmed']}/{n_tp} ({overall['tp']['confirmed'] / n_tp:.0%}), refuted: {overall['tp']['refuted']}"
        )
    if n_fp:
        rows.append(f"false positives refuted: {overall['fp']['refuted']}/{n_fp} ({overall['fp']['refuted'] / n_fp:.0%})")
    return "\n".join(rows)


def format_lists(cases: dict[str, Case], results: Iterable[CaseResult]) -> str:
    results = list(results)
    fps = [h for r in results for h in r.fp]
    fns = [m for r in results for m in r.fn]
    out = [f"false positives ({len(fps)}):"]
    for h in fps:
        note = f" [{h.note}]" if h.note else ""
        out.append(f"  {h.case}  {h.path}:{h.line}  {h.category} {h.rule}{note}: {h.message}")
        out.append(f"      | {_source_line(cases[h.case].dir, h.path, h.line)}")
    out.append(f"false negatives ({len(fns)}):")
    for m in fns:
        lab = m.label
        alt = f" (or {', '.join(str(n) for n in lab.lines if n != lab.line)})" if lab.lines else ""
        out.append(f"  {m.case}  {lab.path}:{lab.line}{alt}  {lab.category}: {cases[m.case].description[:160]}")
        out.append(f"      | {_source_line(cases[m.case].dir, lab.path, lab.line)}")
    return "\n".join(out)


def _hit_json(h: Hit) -> dict[str, Any]:
    return {"case": h.case, "path": h.path, "line": h.line, "category": h.category, "rule": h.rule, "message": h.message, "status": h.status, "note": h.note}


def to_json(scores: dict[str, Score], results: Sequence[CaseResult], sandbox: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "scores": {cat: s.as_dict() for cat, s in scores.items()},
        "false_positives": [_hit_json(h) for r in results for h in r.fp],
        "false_negatives": [
            {"case": m.case, "path": m.label.path, "line": m.label.line, "lines": list(m.label.lines), "category": m.label.category}
            for r in results
            for m in r.fn
        ],
        "true_positives": [_hit_json(h) for r in results for h in r.tp],
    }
    if sandbox:
        data["verdicts"] = {cat: {k: dict(v) for k, v in d.items()} for cat, d in verdicts(results).items()}
        data["refuted"] = [_hit_json(h) | {"true_positive": h.tp} for r in results for h in r.refuted]
    return data


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the corpus folder (default: benchmarks/corpus)")
    p.add_argument("--sandbox", action="store_true", help="run with the sandbox on and print the verdicts")
    p.add_argument("--json", type=Path, metavar="OUT", help="also write the scores and the lists as JSON")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases reviewed at once (default: one per core)")
    p.add_argument("--cli", help="the review-copies executable (default: the one installed next to this Python)")
    p.add_argument("--only", metavar="GLOB", action="append", help="score only the cases whose id matches (repeatable)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per case (default: 120, 600 with --sandbox)")
    args = p.parse_args(argv)

    cases = load_corpus(args.corpus)
    if args.only:
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, pattern) for pattern in args.only)]
    if not cases:
        print(f"no cases under {args.corpus}", file=sys.stderr)
        return 2
    cli = [args.cli] if args.cli else default_cli()
    timeout = args.timeout or (600.0 if args.sandbox else 120.0)

    def one(case: Case) -> tuple[Case, CaseResult | None, str | None]:
        try:
            return case, match_case(case, run_case(case, cli, args.sandbox, timeout)), None
        except CliFailure as exc:
            return case, None, str(exc)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(one, cases))
    failures = [err for _, _, err in outcomes if err]
    if failures:
        for err in failures:
            print(f"score: {err}", file=sys.stderr)
        return 2
    results = [res for _, res, _ in outcomes if res is not None]
    scores = aggregate(cases, results)
    n_neg = sum(c.kind == "negative" for c in cases)
    print(f"review-copies on {len(cases)} cases ({len(cases) - n_neg} positive, {n_neg} negative), {'sandbox on' if args.sandbox else 'offline, no sandbox'}")
    print()
    print(format_table(scores))
    if args.sandbox:
        print()
        print("sandbox verdicts (findings and refuted dropped entries):")
        print(format_verdicts(verdicts(results)))
    print()
    print(format_lists({c.id: c for c in cases}, results))
    if args.json:
        args.json.write_text(json.dumps(to_json(scores, results, args.sandbox), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
