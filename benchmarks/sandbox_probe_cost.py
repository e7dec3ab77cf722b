"""What a probe costs in the warm worker, against a cold `python -c "import torch"`.

    .venv/bin/python benchmarks/sandbox_probe_cost.py [--probes 50] [--cold 5]

Prints, in one run: the cold import (median of fresh interpreters), the worker's start,
and per-probe wall time for 50 probes of two kinds: a minimal probe (fork, namespaces,
limits, one trivial function observed as written and as fixed) and a typical one (the
RC301 example: warning recipe, plain and grad variants, both sides). The aim is a
per-probe cost under 5% of the cold import.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from review_copies.sandbox.protocol import ProbeRequest, Side, Subject, Watch, encode
from review_copies.sandbox.verify.client import Sandbox, clean_env

MINIMAL = "import torch\ndef f(x):\n    return x\n"
TYPICAL = textwrap.dedent(
    """
    import torch
    def f(x: torch.Tensor):
        y = torch.tensor(x)
        return y * 2
    """
).lstrip("\n")


def _side(source: str, watch: tuple[int, int], names: tuple[str, ...]) -> Side:
    lines = source.count("\n")
    return Side(source, "bench.py", ("f",), (2, lines), Watch(watch, names, "assign"))


def requests() -> dict[str, ProbeRequest]:
    fixed = TYPICAL.replace("torch.tensor(x)", "x.detach().clone()")
    return {
        "minimal": ProbeRequest("cpu", (), Subject(_side(MINIMAL, (3, 3), ()), _side(MINIMAL, (3, 3), ()))),
        "typical": ProbeRequest("cpu", ("warning",), Subject(_side(TYPICAL, (3, 3), ("y",)), _side(fixed, (3, 3), ("y",)))),
    }


def cold_import(times: int) -> list[float]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, env=clean_env("/tmp"))
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    cold = statistics.median(cold_import(args.cold))
    print(f"cold `python -c 'import torch'`: median {cold * 1000:.0f} ms of {args.cold}")
    with Sandbox() as sb:
        print(f"worker start (import torch + torch._dynamo + isolation check): {sb.info.start_seconds * 1000:.0f} ms")
        print(f"isolation: {', '.join(f'{k}={v}' for k, v in encode(sb.info.isolation).items())}")
        for name, request in requests().items():
            answer = sb.run(request)  # the first probe of a kind warms nothing in the worker, but keep it out
            assert answer.ok, answer
            walls = []
            for _ in range(args.probes):
                started = time.perf_counter()
                answer = sb.run(request)
                walls.append(time.perf_counter() - started)
                assert answer.ok, answer
            walls.sort()
            median = statistics.median(walls)
            p90 = walls[int(0.9 * (len(walls) - 1))]
            print(
                f"{name:8} probe: median {median * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, mean {statistics.mean(walls) * 1000:.1f} ms "
                f"over {args.probes} = {100 * median / cold:.1f}% of the cold import"
            )


if __name__ == "__main__":
    main()
