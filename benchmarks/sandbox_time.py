"""What the sandbox costs a review, side by side: each review run with `--no-sandbox`; then
with the sandbox as in CI (`CI=true`: a fresh worker, no cache: cold); then as on a
developer's machine (the worker kept warm by the review before, an empty verdict cache:
warm worker); then again with that cache (a re-review of the same head: cached), one after
the other on the same machine.

    python benchmarks/sandbox_time.py [--corpus] [--repo GIT_DIR --commits N] [--cli PATH] [--json OUT]

`--corpus` reviews every case of `benchmarks/corpus/` as a two-commit repository; `--repo`
reviews the last N commits of a repository (a bare clone works) as pull requests
(`--base C^ --head C`). Printed: per review the three wall times and the finding count;
then, for all reviews and for those with 1 to 10 findings, the median and p90 of the
sandbox-on / sandbox-off ratio in each of the three ways. Wall times are of the whole CLI process,
as a user waits for it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from score import DEFAULT_CORPUS, build_repo, load_corpus


@dataclass
class Timing:
    review: str
    findings: int
    off: float
    cold: float
    warm: float
    cached: float
    runs: int
    cache_hits: int
    over_budget: int
    statuses: dict[str, int]

    @property
    def ratio_cold(self) -> float:
        return self.cold / self.off

    @property
    def ratio_warm(self) -> float:
        return self.warm / self.off

    @property
    def ratio_cached(self) -> float:
        return self.cached / self.off


def _run(cli: str, args: list[str], cache: Path, ci: bool = False) -> tuple[float, dict]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("OPENAI_API_KEY", None)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    started = time.perf_counter()
    proc = subprocess.run([cli, *args, "--offline", "--format", "json", "--fail-on", "none"], capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return seconds, json.loads(proc.stdout)


def time_review(cli: str, name: str, args: list[str]) -> Timing:
    cold_cache = Path(tempfile.mkdtemp(prefix="rc-time-cache-"))
    cache = Path(tempfile.mkdtemp(prefix="rc-time-cache-"))
    try:
        off, _ = _run(cli, [*args, "--no-sandbox"], cache)
        cold, report = _run(cli, args, cold_cache, ci=True)
        warm, _ = _run(cli, args, cache)
        cached, again = _run(cli, args, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(cold_cache, ignore_errors=True)
    statuses: dict[str, int] = {}
    for f in report["findings"] + report["dropped"]:
        status = f["verification"]["status"]
        statuses[status] = statuses.get(status, 0) + 1
    stats = report["stats"]
    return Timing(name, len(report["findings"]) + len(report["dropped"]), off, cold, warm, cached, stats.get("sandbox_runs", 0),
                  again["stats"].get("sandbox_cache_hits", 0), stats.get("sandbox_over_budget", 0), statuses)


def corpus_reviews(corpus: Path, work: Path) -> list[tuple[str, list[str]]]:
    out = []
    for case in load_corpus(corpus):
        repo = build_repo(case, work / case.id)
        out.append((case.id, ["--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD"]))
    return out


def commit_reviews(git_dir: str, commits: int) -> list[tuple[str, list[str]]]:
    shas = subprocess.run(["git", "--git-dir", git_dir, "rev-list", "--first-parent", "--no-merges", f"-{commits}", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.split()
    return [(sha[:10], ["--repo", git_dir, "--base", f"{sha}^", "--head", sha]) for sha in shas]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def summary(timings: list[Timing], label: str) -> dict[str, object]:
    def block(rows: list[Timing]) -> dict[str, object]:
        if not rows:
            return {"reviews": 0}
        cold = [t.ratio_cold for t in rows]
        warm = [t.ratio_warm for t in rows]
        cached = [t.ratio_cached for t in rows]
        return {
            "reviews": len(rows),
            "findings": sum(t.findings for t in rows),
            "cold_median": round(statistics.median(cold), 2), "cold_p90": round(_p90(cold), 2),
            "warm_worker_median": round(statistics.median(warm), 2), "warm_worker_p90": round(_p90(warm), 2),
            "cached_median": round(statistics.median(cached), 2), "cached_p90": round(_p90(cached), 2),
            "off_median_s": round(statistics.median(t.off for t in rows), 2),
            "cold_median_s": round(statistics.median(t.cold for t in rows), 2),
        }

    return {"set": label, "all": block(timings), "1-10 findings": block([t for t in timings if 1 <= t.findings <= 10])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="store_true", help="the labeled corpus, one review per case")
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repo", help="a repository (git dir) whose last commits are reviewed")
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--cli", default=shutil.which("review-copies") or "review-copies")
    parser.add_argument("--json", type=Path, help="write every timing and the summaries here")
    args = parser.parse_args()
    sets: list[tuple[str, list[tuple[str, list[str]]]]] = []
    work = Path(tempfile.mkdtemp(prefix="rc-time-"))
    if args.corpus:
        sets.append(("corpus", corpus_reviews(args.corpus_dir, work)))
    if args.repo:
        sets.append((f"{Path(args.repo).resolve().parent.name} last {args.commits} commits", commit_reviews(args.repo, args.commits)))
    results: dict[str, object] = {"timings": {}, "summaries": []}
    try:
        for label, reviews in sets:
            timings = []
            print(f"== {label}")
            print(f"{'review':40} {'found':>5} {'off s':>6} {'cold s':>7} {'warm s':>7} {'cache s':>7} {'cold x':>6} {'warm x':>6} {'cache x':>7}  verdicts")
            for name, review_args in reviews:
                t = time_review(args.cli, name, review_args)
                timings.append(t)
                verdicts = ", ".join(f"{k} {v}" for k, v in sorted(t.statuses.items()))
                print(f"{name[:40]:40} {t.findings:5d} {t.off:6.2f} {t.cold:7.2f} {t.warm:7.2f} {t.cached:7.2f} {t.ratio_cold:6.2f} {t.ratio_warm:6.2f} {t.ratio_cached:7.2f}  {verdicts}", flush=True)
            s = summary(timings, label)
            print(json.dumps(s, indent=1))
            results["timings"][label] = [asdict(t) for t in timings]  # type: ignore[index]
            results["summaries"].append(s)  # type: ignore[union-attr]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
