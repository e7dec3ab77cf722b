"""Speed of `review-copies --all --offline --no-sandbox` next to TorchFix, on the same files, in one run.

Corpora (all available offline):
  * the Python sources of the installed `torch` package;
  * `transformers` from the package index, unpacked into a throwaway folder (no install).

TorchFix (archived; pins libcst < 1.6) is installed into its own virtual environment under
the work folder, so its pins never touch ours. Both tools run as whole processes over the
same file list, timed wall-clock; the table prints files/s, lines/s and the ratio, and the
peak memory of each process.

    python benchmarks/speed_vs_torchfix.py [--work .bench] [--runs 1] [--jobs N] [--corpus torch|transformers|all] [--compare NAME=EXE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Corpus:
    name: str
    root: Path
    files: int
    lines: int


def _count(root: Path) -> tuple[int, int]:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        with path.open("rb") as handle:
            lines += sum(1 for _ in handle)
    return files, lines


def torch_corpus() -> Corpus:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin, "torch is not installed"
    root = Path(spec.origin).parent
    return Corpus("torch", root, *_count(root))


def transformers_corpus(work: Path) -> Corpus:
    target = work / "transformers-src"
    if not (target / "transformers").is_dir():
        wheels = work / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "transformers", "-d", str(wheels)], check=True)
        wheel = next(wheels.glob("transformers-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    root = target / "transformers"
    return Corpus("transformers", root, *_count(root))


def torchfix_venv(work: Path) -> Path:
    venv = work / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "torchfix"], check=True)
    return exe


# Runs the command in a fresh process and prints the largest RSS among its processes: the
# benchmark's own RUSAGE_CHILDREN keeps the maximum of every earlier run.
_MEASURE = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)"
)


def _timed(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB of the largest process of the run, exit status."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    peak_kib, code = proc.stdout.split()
    return seconds, int(peak_kib) / 1024, int(code)


def review_copies_cmd() -> list[str]:
    exe = shutil.which("review-copies")
    return [exe] if exe else [sys.executable, "-m", "review_copies"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=str(ROOT / ".bench"), help="throwaway folder for TorchFix's venv and transformers")
    parser.add_argument("--runs", type=int, default=1, help="runs per tool and corpus (the median is shown)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="TorchFix -j (review-copies uses one worker per core)")
    parser.add_argument("--corpus", choices=("torch", "transformers", "all"), default="all")
    parser.add_argument("--compare", metavar="NAME=EXE", action="append", default=[],
                        help="another review-copies executable timed the same way, e.g. before=/path/to/old/venv/bin/review-copies")
    args = parser.parse_args()
    others = [tuple(spec.split("=", 1)) for spec in args.compare]
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    corpora = []
    if args.corpus in ("torch", "all"):
        corpora.append(torch_corpus())
    if args.corpus in ("transformers", "all"):
        corpora.append(transformers_corpus(work))
    torchfix = torchfix_venv(work)
    env_note = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    print(f"review-copies vs TorchFix, {env_note}, median of {args.runs} run(s)\n")
    header = f"{'corpus':<13} {'files':>6} {'lines':>9} | {'tool':<14} {'wall s':>7} {'files/s':>8} {'lines/s':>9} {'peak MiB':>8}"
    print(header)
    print("-" * len(header))
    for corpus in corpora:
        ours = [*review_copies_cmd(), "--all", "--offline", "--no-sandbox", "--format", "json", "--fail-on", "none", str(corpus.root)]
        theirs = [str(torchfix), "--select=ALL", f"-j{args.jobs}", str(corpus.root)]
        results = {}
        extra = [(name, [exe, *ours[len(review_copies_cmd()):]]) for name, exe in others]
        for tool, cmd in (("review-copies", ours), *extra, ("torchfix", theirs)):
            runs = sorted((_timed(cmd, work) for _ in range(args.runs)), key=lambda r: r[0])
            seconds, peak, code = runs[len(runs) // 2]
            results[tool] = seconds
            failed = "" if code in (0, 1) else f"  (exit {code})"
            rate = f"{corpus.files / seconds:>8.1f} {corpus.lines / seconds:>9.0f}"
            print(f"{corpus.name:<13} {corpus.files:>6} {corpus.lines:>9} | {tool:<14} {seconds:>7.1f} {rate} {peak:>8.0f}{failed}")
        print(f"{'':<31} | ratio: review-copies is {results['torchfix'] / results['review-copies']:.1f}x TorchFix's files/s")
        for name, _ in others:
            print(f"{'':<31} | ratio: review-copies is {results[name] / results['review-copies']:.2f}x {name}'s files/s")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
