"""Recall and precision on real bugs that real projects later fixed (`cases.json`), by
category, on the tuning half and the held-out half of `split.json`.

    python benchmarks/mined/score_mined.py [--mirrors DIR] [--cli PATH] [--json OUT] [--only ID]

Each case names a fix commit of a public repository, the file and the lines the fix
changed, and the category of the bug. The repositories' history comes from the `fetch`
tool (`/work/.mirror/<owner>+<name>/repo`, or `--mirrors`); nothing of their code is kept
in this repository. For every case, in a checkout of the whole repository:

- `change`: the fix reversed, reviewed as a pull request would be (the change that brings
  the bug back), with the repository around it;
- `all`: the buggy file reviewed whole (`--all`), as the issue measured it;
- false alarms: the fixed file reviewed whole; a finding of the case's category on the
  lines the fix wrote is a false positive (the fix removed the bug there).

A case is caught when a finding of its category touches one of its buggy lines. Offline,
without the sandbox: this measures the rules.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MIRRORS = Path("/work/.mirror")


@dataclass
class Case:
    id: str
    repo: str
    fix: str
    category: str
    buggy: list[str]
    why: str
    path: str = ""
    half: str = ""
    # Resolved from the repository: full commit ids, buggy (old-side) and fixed (new-side) lines.
    sha: str = ""
    parent: str = ""
    buggy_lines: list[int] = field(default_factory=list)
    fixed_lines: list[int] = field(default_factory=list)


def case_id(raw: dict) -> str:
    return f"{raw['repo'].split('/')[1]}-{raw['fix'][:10]}"


def load(split_path: Path = HERE / "split.json") -> list[Case]:
    raw = json.loads((HERE / "cases.json").read_text())
    split = json.loads(split_path.read_text()) if split_path.exists() else {}
    halves = {cid: half for half in ("tuning", "held-out") for cid in split.get(half, [])}
    return [Case(id=case_id(r), half=halves.get(case_id(r), ""), **r) for r in raw]


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True, errors="replace").stdout


def _changed(git_dir: Path, parent: str, sha: str, path: str) -> list[tuple[list[int], list[int], list[str]]]:
    """(old lines, new lines, old texts) of each hunk of the fix in `path`; a hunk that only
    adds lines (a `.detach()` on a line of its own) gives the unchanged old lines around
    where it adds them, since the bug sits there."""
    out = []
    diff = git(git_dir, "diff", "-U0", "--no-color", parent, sha, "--", path)
    old_no = new_no = 0
    current: tuple[list[int], list[int], list[str]] | None = None
    for line in diff.splitlines():
        if line.startswith("@@"):
            head = line.split("@@")[1].split()
            old_start = int(head[0][1:].split(",")[0])
            new_start = int(head[1][1:].split(",")[0])
            old_no, new_no = old_start, new_start
            current = ([], [], [])
            out.append(current)
            if head[0].endswith(",0"):
                # Pure insertion after old line `old_start`: the lines just above it.
                old_text = git(git_dir, "show", f"{parent}:{path}").splitlines()
                around = range(max(1, old_start - 5), min(len(old_text), old_start + 3) + 1)
                current[0].extend(around)
                current[2].extend(old_text[n - 1] for n in around)
        elif current is not None and line.startswith("-") and not line.startswith("---"):
            current[0].append(old_no)
            current[2].append(line[1:])
            old_no += 1
        elif current is not None and line.startswith("+") and not line.startswith("+++"):
            current[1].append(new_no)
            new_no += 1
    return out


def resolve(case: Case, mirrors: Path) -> Case:
    git_dir = mirrors / case.repo.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        raise SystemExit(f"{case.id}: no history of {case.repo} under {mirrors}: bring it with the fetch tool (github:{case.repo})")
    case.sha = git(git_dir, "rev-parse", f"{case.fix}^{{commit}}").strip()
    case.parent = git(git_dir, "rev-parse", f"{case.sha}^").strip()
    paths = [case.path] if case.path else [p for p in git(git_dir, "diff", "--name-only", case.parent, case.sha, "--", "*.py").split() if "test" not in p.lower()]
    for path in paths:
        buggy, fixed = [], []
        for old, new, texts in _changed(git_dir, case.parent, case.sha, path):
            hit = [n for n, t in zip(old, texts) if any(b in t for b in case.buggy)]
            if hit:
                buggy += hit
                fixed += new
        if not buggy:
            # The fix added a line after the buggy one and changed it only by context
            # (`output = output.detach().clone()` under `def _output_update(self, output)`).
            old_text = git(git_dir, "show", f"{case.parent}:{path}").splitlines()
            for old, new, _ in _changed(git_dir, case.parent, case.sha, path):
                if not old:
                    continue
                near = range(max(1, min(old) - 5), min(len(old_text), max(old) + 5) + 1)
                hit = [n for n in near if any(b in old_text[n - 1] for b in case.buggy)]
                if hit:
                    buggy += hit
                    fixed += new
        if buggy:
            case.path, case.buggy_lines, case.fixed_lines = path, sorted(set(buggy)), sorted(set(fixed))
            return case
    raise SystemExit(f"{case.id}: no line the fix removed contains {case.buggy!r}")


def _checkout(git_dir: Path, commit: str, dest: Path) -> None:
    """The commit's Python files (no history: the reviewer reads them as a working tree).
    Only `*.py`: fetched snapshots lack files of 4 MiB and more, which are never code."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit, "--", "*.py"], capture_output=True, check=False)
    if archive.returncode == 0:
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    else:  # a Python file missing from the snapshot: take the others one by one
        names = git(git_dir, "ls-tree", "-r", "--name-only", commit).splitlines()
        for name in (n for n in names if n.endswith(".py")):
            blob = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", f"{commit}:{name}"], capture_output=True, check=False)
            if blob.returncode == 0:
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                (dest / name).write_bytes(blob.stdout)
    env = {**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x", "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", commit[:10]]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, env=env, capture_output=True)


def _review(cli: str, repo: Path, *args: str) -> list[dict]:
    env = {**os.environ, "CI": "true"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run([cli, "--repo", str(repo), "--offline", "--no-sandbox", "--format", "json", "--fail-on", "none", *args],
                          capture_output=True, text=True, env=env, timeout=900, cwd=repo)
    if proc.returncode != 0:
        raise RuntimeError(f"{repo}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)["findings"]


def _touches(finding: dict, path: str, lines: list[int], category: str | None) -> bool:
    if finding["path"] != path or (category is not None and finding["category"] != category):
        return False
    return any(finding["line"] <= n <= finding["end_line"] for n in lines)


def score_case(case: Case, mirrors: Path, cli: str) -> dict:
    git_dir = mirrors / case.repo.replace("/", "+") / "repo"
    work = Path(tempfile.mkdtemp(prefix=f"mined-{case.id}-"))
    try:
        buggy, fixed = work / "buggy", work / "fixed"
        _checkout(git_dir, case.parent, buggy)
        _checkout(git_dir, case.sha, fixed)
        # The change that brings the bug back: the fixed file replaced by the buggy one.
        diff = subprocess.run(["git", "--git-dir", str(git_dir), "diff", "--no-color", case.sha, case.parent, "--", case.path],
                              capture_output=True, text=True, check=True).stdout
        (work / "change.diff").write_text(diff)
        change = _review(cli, buggy, "--diff", str(work / "change.diff"))
        whole = _review(cli, buggy, "--all", case.path)
        after_fix = _review(cli, fixed, "--all", case.path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "id": case.id, "half": case.half, "category": case.category, "path": case.path,
        "buggy_lines": case.buggy_lines, "fixed_lines": case.fixed_lines,
        "caught_change": any(_touches(f, case.path, case.buggy_lines, case.category) for f in change),
        "caught_all": any(_touches(f, case.path, case.buggy_lines, case.category) for f in whole),
        "wrong_category": sorted({f["category"] for f in whole if _touches(f, case.path, case.buggy_lines, None) and f["category"] != case.category}),
        "false_alarms": [f"{f['rule']}:{f['line']}" for f in after_fix if _touches(f, case.path, case.fixed_lines, case.category)],
        "findings_on_buggy_lines": [f"{f['rule']}:{f['line']} {f['category']}" for f in whole if _touches(f, case.path, case.buggy_lines, None)],
    }


def summarize(results: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for half in ("tuning", "held-out"):
        rows = [r for r in results if r["half"] == half]
        by_cat: dict[str, Counter] = defaultdict(Counter)
        for r in rows:
            c = by_cat[r["category"]]
            c["cases"] += 1
            c["caught_change"] += r["caught_change"]
            c["caught_all"] += r["caught_all"]
            c["false_alarms"] += bool(r["false_alarms"])
        total = Counter()
        for c in by_cat.values():
            total.update(c)
        def rates(c: Counter) -> dict:
            tp = c["caught_change"]
            return {
                "cases": c["cases"], "caught_change": tp, "caught_all": c["caught_all"],
                "recall_change": round(tp / c["cases"], 2) if c["cases"] else None,
                "recall_all": round(c["caught_all"] / c["cases"], 2) if c["cases"] else None,
                "false_alarms": c["false_alarms"],
                "precision": round(tp / (tp + c["false_alarms"]), 2) if tp + c["false_alarms"] else None,
            }
        out[half] = {"overall": rates(total), **{cat: rates(c) for cat, c in sorted(by_cat.items())}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS)
    parser.add_argument("--cli", default=shutil.which("review-copies") or "review-copies")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    cases = [resolve(c, args.mirrors) for c in load() if not args.only or c.id in args.only]
    results = []
    for case in cases:
        r = score_case(case, args.mirrors, args.cli)
        results.append(r)
        mark = lambda b: "caught" if b else "missed"  # noqa: E731
        extra = f" false alarms {r['false_alarms']}" if r["false_alarms"] else ""
        wrong = f" other categories {r['wrong_category']}" if r["wrong_category"] else ""
        print(f"{r['half']:8} {r['category']:17} {r['id']:32} change {mark(r['caught_change'])}  all {mark(r['caught_all'])}{wrong}{extra}", flush=True)
    summary = summarize(results)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "summary": summary}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
