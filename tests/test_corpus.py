"""The labeled corpus (benchmarks/corpus): schema, labels on changed lines, every proof holds with
real torch, and the scorer's matching logic."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
CORPUS = BENCH / "corpus"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


score = _load("corpus_score", BENCH / "score.py")
CASE_DIRS = sorted(d for d in CORPUS.iterdir() if d.is_dir() and not d.name.startswith((".", "_")))
CASE_KEYS = {"id", "description", "labels", "kind"}
LABEL_KEYS = {"path", "line", "category", "lines"}


def _case_json(d: Path) -> dict[str, Any]:
    return json.loads((d / "case.json").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- corpus as a whole


def test_corpus_size_and_balance() -> None:
    cases = [_case_json(d) for d in CASE_DIRS]
    assert len(cases) >= 80
    kinds = Counter(c["kind"] for c in cases)
    assert kinds["negative"] * 3 >= len(cases), kinds
    positives = Counter(lab["category"] for c in cases for lab in c["labels"])
    for category in score.CATEGORIES:
        assert positives[category] >= 8, f"{category}: only {positives[category]} labels"
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))


# ----------------------------------------------------------------------------- each case


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=[d.name for d in CASE_DIRS])
def test_case_schema(case_dir: Path) -> None:
    data = _case_json(case_dir)
    assert set(data) <= CASE_KEYS | {"notes"} and set(data) >= CASE_KEYS, sorted(data)
    assert data["id"] == case_dir.name
    assert isinstance(data["description"], str) and len(data["description"]) >= 40
    assert data["kind"] in ("positive", "negative")
    assert (case_dir / "after").is_dir(), "every case needs an after/ tree"
    assert (case_dir / "proof.py").is_file(), "every case needs a proof.py"
    labels = data["labels"]
    assert isinstance(labels, list)
    if data["kind"] == "negative":
        assert labels == [], "negative cases carry no labels"
    else:
        assert labels, "positive cases carry at least one label"
    seen = set()
    for lab in labels:
        assert set(lab) <= LABEL_KEYS and {"path", "line", "category"} <= set(lab), lab
        assert lab["category"] in score.CATEGORIES, lab
        target = case_dir / "after" / lab["path"]
        assert target.is_file(), f"{lab['path']} is not a file of after/"
        n_lines = len(target.read_text(encoding="utf-8").splitlines())
        assert isinstance(lab["line"], int) and 1 <= lab["line"] <= n_lines, lab
        if "lines" in lab:
            alts = lab["lines"]
            assert isinstance(alts, list) and len(alts) >= 2 and lab["line"] in alts, lab
            assert all(isinstance(n, int) and 1 <= n <= n_lines for n in alts), lab
        key = (lab["path"], lab["line"], lab["category"])
        assert key not in seen, f"duplicate label {key}"
        seen.add(key)
    for tree in ("before", "after"):
        for py in sorted((case_dir / tree).rglob("*.py")):
            compile(py.read_text(encoding="utf-8"), str(py), "exec")
    proof = (case_dir / "proof.py").read_text(encoding="utf-8")
    compile(proof, str(case_dir / "proof.py"), "exec")
    assert "reviewer" not in proof.split("\n", 3)[-1].split("import torch")[0], "proofs import nothing from the project"


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=[d.name for d in CASE_DIRS])
def test_labels_sit_on_changed_lines(case_dir: Path, tmp_path: Path) -> None:
    case = score.load_case(case_dir)
    repo = score.build_repo(case, tmp_path / "repo")
    changed = score.changed_lines(repo)
    assert changed, "the change is empty"
    for lab in case.labels:
        for line in {lab.line, *lab.lines}:
            assert line in changed.get(lab.path, set()), f"{lab.path}:{line} is not a line added by the change"


# ----------------------------------------------------------------------------- proofs


def _run_chunk(dirs: list[Path]) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_proofs.py"), "--json", "--timeout", "20", *map(str, dirs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    done = {r["case"] for r in results}
    for d in dirs:
        if d.name not in done:
            results.append(
                {"case": d.name, "ok": False, "seconds": 0.0, "error": f"the runner died (rc {proc.returncode}): {proc.stderr[-800:]}", "output": ""}
            )
    return results


def test_every_proof_holds() -> None:
    workers = max(1, min(4, os.cpu_count() or 1))
    chunks = [CASE_DIRS[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = [r for chunk in pool.map(_run_chunk, chunks) for r in chunk]
    failed = [r for r in results if not r["ok"]]
    report = "\n\n".join(f"{r['case']}: {r['error']}\n{r['output'][-600:]}" for r in failed)
    assert not failed, f"{len(failed)} proofs failed:\n{report}"
    slow = [(r["case"], r["seconds"]) for r in results if r["seconds"] > 2.0]
    assert not slow, f"proofs should take well under a second: {slow}"
    assert len(results) == len(CASE_DIRS)


# ----------------------------------------------------------------------------- scorer matching


def _case(labels: list[Any], kind: str = "positive", cid: str = "c") -> Any:
    return score.Case(id=cid, kind=kind, description="synthetic", labels=tuple(labels), dir=Path("."))


def _finding(path: str, line: int, category: str, status: str = "not-run") -> dict[str, Any]:
    return {"path": path, "line": line, "end_line": line, "category": category, "rule": "RC999", "message": "m", "verification": {"status": status}}


def test_matching_exact_alternative_and_duplicates() -> None:
    case = _case([score.Label("a.py", 10, "alias-mutation", (9, 10)), score.Label("a.py", 20, "graph-retention")])
    report = {
        "findings": [
            _finding("a.py", 9, "alias-mutation"),  # alternative line: true positive
            _finding("a.py", 10, "alias-mutation"),  # second finding on the same label: duplicate
            _finding("a.py", 20, "stale-snapshot"),  # right line, wrong category
            _finding("b.py", 20, "graph-retention"),  # wrong path
        ],
        "dropped": [],
    }
    res = score.match_case(case, report)
    assert [(h.line, h.category) for h in res.tp] == [(9, "alias-mutation")]
    assert sorted((h.path, h.line, h.category, h.note) for h in res.fp) == [
        ("a.py", 10, "alias-mutation", "duplicate"),
        ("a.py", 20, "stale-snapshot", ""),
        ("b.py", 20, "graph-retention", ""),
    ]
    assert [(m.label.line, m.label.category) for m in res.fn] == [(20, "graph-retention")]


def test_matching_line_must_be_exact_without_alternatives() -> None:
    case = _case([score.Label("t.py", 5, "copy-construct")])
    res = score.match_case(case, {"findings": [_finding("t.py", 6, "copy-construct")]})
    assert not res.tp and len(res.fp) == 1 and len(res.fn) == 1


def test_aggregate_and_f1() -> None:
    pos = _case([score.Label("t.py", 1, "numpy-bridge"), score.Label("t.py", 2, "numpy-bridge")], cid="p")
    neg = _case([], kind="negative", cid="n")
    results = [
        score.match_case(pos, {"findings": [_finding("t.py", 1, "numpy-bridge")]}),
        score.match_case(neg, {"findings": [_finding("t.py", 3, "numpy-bridge")]}),
    ]
    scores = score.aggregate([pos, neg], results)
    s = scores["numpy-bridge"]
    assert (s.labels, s.tp, s.fp, s.fn) == (2, 1, 1, 1)
    assert s.precision == 0.5 and s.recall == 0.5 and s.f1 == 0.5
    assert scores["overall"].tp == 1 and scores["overall"].fp == 1
    empty = scores["redundant-copy"]
    assert empty.precision is None and empty.recall is None and empty.f1 is None
    table = score.format_table(scores)
    assert "numpy-bridge" in table and "overall" in table and " 0.50" in table


def test_sandbox_verdicts_count_refuted_dropped_entries() -> None:
    case = _case([score.Label("t.py", 4, "stale-snapshot"), score.Label("t.py", 8, "redundant-copy")])
    report = {
        "findings": [_finding("t.py", 4, "stale-snapshot", "confirmed"), _finding("t.py", 9, "stale-snapshot", "inconclusive")],
        "dropped": [
            _finding("t.py", 8, "redundant-copy", "refuted") | {"reason": "sandbox refuted the suggestion"},
            _finding("t.py", 12, "alias-mutation", "refuted") | {"reason": "sandbox refuted: no aliasing"},
            _finding("t.py", 13, "alias-mutation") | {"reason": "the LLM answer broke the schema"},
        ],
    }
    res = score.match_case(case, report)
    table = score.verdicts([res])
    assert table["stale-snapshot"]["tp"]["confirmed"] == 1 and table["stale-snapshot"]["fp"]["inconclusive"] == 1
    assert table["redundant-copy"]["tp"]["refuted"] == 1  # a true positive the sandbox refuted
    assert table["alias-mutation"]["fp"]["refuted"] == 1  # the schema drop is not a sandbox verdict
    assert table["overall"]["tp"]["refuted"] == 1 and sum(table["overall"]["fp"].values()) == 2
    # refuted entries are not findings: the label stays a false negative
    assert [m.label.line for m in res.fn] == [8]


def test_build_repo_handles_new_and_deleted_files(tmp_path: Path) -> None:
    case_dir = tmp_path / "case"
    (case_dir / "before").mkdir(parents=True)
    (case_dir / "after" / "pkg").mkdir(parents=True)
    (case_dir / "before" / "old.py").write_text("x = 1\n")
    (case_dir / "after" / "pkg" / "new.py").write_text("import torch\ny = 2\n")
    (case_dir / "case.json").write_text(json.dumps({"id": "case", "description": "d", "labels": [], "kind": "negative"}))
    repo = score.build_repo(score.load_case(case_dir), tmp_path / "repo")
    assert score.changed_lines(repo) == {"pkg/new.py": {1, 2}}
    # no before/ at all: an empty first commit
    (case_dir / "before" / "old.py").unlink()
    (case_dir / "before").rmdir()
    repo2 = score.build_repo(score.load_case(case_dir), tmp_path / "repo2")
    assert score.changed_lines(repo2) == {"pkg/new.py": {1, 2}}


FAKE_CLI = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
repo = Path(args[args.index("--repo") + 1])
if (repo / "boom.py").exists():
    print("review-copies: internal error: boom", file=sys.stderr)
    sys.exit(2)
sandbox = "--no-sandbox" not in args
status = "confirmed" if sandbox else "not-run"
findings = [{"path": "t.py", "line": 2, "end_line": 2, "category": "copy-construct", "rule": "RC301", "severity": "warning",
             "message": "fake", "source": "static", "suggestion": None, "verification": {"status": status, "device": None, "evidence": ""}}]
dropped = [{"path": "t.py", "line": 3, "end_line": 3, "category": "alias-mutation", "rule": "RC101", "message": "fake",
            "verification": {"status": "refuted"}, "reason": "sandbox refuted"}] if sandbox else []
print(json.dumps({"version": 1, "findings": findings, "dropped": dropped, "stats": {}}))
sys.exit(1)
"""


def _mini_corpus(root: Path, boom: bool = False) -> Path:
    corpus = root / "corpus"
    for cid, kind, labels in (("pos", "positive", [{"path": "t.py", "line": 2, "category": "copy-construct"}]), ("neg", "negative", [])):
        d = corpus / cid
        (d / "after").mkdir(parents=True)
        (d / "after" / "t.py").write_text("import torch\nx = torch.tensor(torch.ones(2))\ny = x\n")
        if boom and cid == "neg":
            (d / "after" / "boom.py").write_text("\n")
        (d / "case.json").write_text(json.dumps({"id": cid, "description": "synthetic case", "labels": labels, "kind": kind}))
    return corpus


def test_scorer_end_to_end_with_a_fake_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = tmp_path / "fake-cli"
    cli.write_text(f"#!{sys.executable}\n{FAKE_CLI}")
    cli.chmod(0o755)
    corpus = _mini_corpus(tmp_path)
    out_json = tmp_path / "score.json"
    assert score.main(["--corpus", str(corpus), "--cli", str(cli), "--jobs", "2", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "2 cases (1 positive, 1 negative)" in text and "overall" in text
    data = json.loads(out_json.read_text())
    assert data["scores"]["copy-construct"]["tp"] == 1 and data["scores"]["copy-construct"]["fp"] == 1  # the negative case's finding
    assert data["scores"]["overall"]["precision"] == 0.5 and data["scores"]["overall"]["recall"] == 1.0
    assert score.main(["--corpus", str(corpus), "--cli", str(cli), "--sandbox"]) == 0
    text = capsys.readouterr().out
    assert "sandbox verdicts" in text and "true positives confirmed: 1/1" in text and "false positives refuted: 2/3" in text


def test_scorer_exits_2_naming_the_case_when_the_cli_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = tmp_path / "fake-cli"
    cli.write_text(f"#!{sys.executable}\n{FAKE_CLI}")
    cli.chmod(0o755)
    corpus = _mini_corpus(tmp_path, boom=True)
    assert score.main(["--corpus", str(corpus), "--cli", str(cli)]) == 2
    err = capsys.readouterr().err
    assert "neg: the CLI exited 2" in err and "boom" in err
