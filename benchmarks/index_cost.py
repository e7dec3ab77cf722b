"""What the repository index costs at most: the facts of every Python file that mentions
torch in a repository's commit, from an empty cache (cold) and again from the cache a first
run left (warm). A review asks the index lazily and reads only the files that mention what
a rule asks about, so this is an upper bound on one review's index time.

    python benchmarks/index_cost.py --git-dir /path/to/repo.git [--commit HEAD]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from review_copies.index.repo import RepoIndex
from review_copies.source.tree import RevisionFiles


def run(git_dir: str, commit: str, cache: Path) -> tuple[int, float, float]:
    files = RevisionFiles(git_dir, commit)
    started = time.perf_counter()
    paths = files.mentioning("torch")
    grep = time.perf_counter() - started
    index = RepoIndex(files, cache)
    for path in paths:
        index.facts(path)
    return len(paths), grep, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args()
    commit = subprocess.run(["git", "--git-dir", args.git_dir, "rev-parse", args.commit], capture_output=True, text=True, check=True).stdout.strip()
    total = subprocess.run(["git", "--git-dir", args.git_dir, "ls-tree", "-r", "--name-only", commit], capture_output=True, text=True, check=True).stdout
    python = sum(1 for name in total.splitlines() if name.endswith(".py"))
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        n, grep, cold = run(args.git_dir, commit, cache)
        _, _, warm = run(args.git_dir, commit, cache)
    print(f"{args.git_dir} @ {commit[:10]}: {python} Python files, {n} mention torch")
    print(f"git grep {grep:.2f} s; all facts cold {cold:.2f} s, warm {warm:.2f} s ({cold / warm:.1f}x)")


if __name__ == "__main__":
    main()
