"""The sandbox's effect on a labeled corpus: how many true positives it confirms, how
many look-alikes it refutes, and precision/recall of what is posted with and without it.

    .venv/bin/python benchmarks/sandbox_corpus.py

The corpus is tests/sandbox_cases.py (true positives and look-alikes for all seven
categories) plus every rule's INVALID examples (all true positives). Every case is
counted as a finding the static stage made; without the sandbox all are posted, with
it the refuted ones go to `dropped`.
"""

from __future__ import annotations

import io
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from sandbox_cases import CASES  # noqa: E402
from sandbox_helpers import finding  # noqa: E402

from review_copies.review.engine import example_job, review_file  # noqa: E402
from review_copies.rules import all_rules  # noqa: E402
from review_copies.sandbox.verify.client import Sandbox  # noqa: E402
from review_copies.sandbox.verify.verifier import Verifier  # noqa: E402


def labeled() -> list[tuple[str, str, object, str]]:
    """(name, label, finding, text) for every case."""
    out = []
    for c in CASES:
        f, text = finding(c.code, c.line, c.category, c.fix, c.fix_lines, c.rule)
        out.append((c.name, c.label, f, text))
    for rule in all_rules():
        for i, example in enumerate(rule.INVALID):
            result = review_file(example_job(f"{rule.code}_{i}.py", example.source, example.base, (rule.code,)))
            for f in result.findings:
                if f.line <= example.line <= f.end_line:
                    out.append((f"{rule.code}-invalid-{i}", "tp", f, example.source))
    return out


def main() -> None:
    cases = labeled()
    verdicts: Counter[tuple[str, str]] = Counter()
    started = time.perf_counter()
    with Sandbox() as sb:
        verifier = Verifier(sb, "cpu", io.StringIO())
        for name, label, f, text in cases:
            status = verifier.verification(f, text, ["cpu"]).status.value
            verdicts[(label, status)] += 1
            print(f"{label} {status:12} {name}")
    seconds = time.perf_counter() - started
    tp = sum(n for (label, _), n in verdicts.items() if label == "tp")
    fp = sum(n for (label, _), n in verdicts.items() if label == "fp")
    tp_kept = tp - verdicts[("tp", "refuted")]
    fp_kept = fp - verdicts[("fp", "refuted")]
    print()
    print(f"{len(cases)} findings ({tp} true positives, {fp} false positives) in {seconds:.1f} s")
    for label in ("tp", "fp"):
        row = ", ".join(f"{s} {verdicts[(label, s)]}" for s in ("confirmed", "refuted", "inconclusive", "not-run"))
        print(f"  {label}: {row}")
    print(f"true positives confirmed: {verdicts[('tp', 'confirmed')] / tp:.0%}; refuted: {verdicts[('tp', 'refuted')]}")
    print(f"false positives refuted and dropped: {verdicts[('fp', 'refuted')] / fp:.0%}")
    print(f"precision without the sandbox {tp / (tp + fp):.0%}, with it {tp_kept / (tp_kept + fp_kept):.0%}")
    print(f"recall with the sandbox relative to without: {tp_kept / tp:.0%}")


if __name__ == "__main__":
    main()
