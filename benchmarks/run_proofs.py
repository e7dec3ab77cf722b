"""Run the corpus proofs (`benchmarks/corpus/<id>/proof.py`) in one process, each in a fresh namespace.

    python benchmarks/run_proofs.py [--json] [--timeout S] [CASE_DIR ...]

torch is imported once; then every proof runs through `runpy.run_path(..., run_name="__main__")`
with its own globals, its output captured, warnings filters and the global torch switches it may
flip restored afterwards, and a per-proof alarm. A proof passes when it returns or exits 0.
With --json one JSON object per proof is printed ({"case", "ok", "seconds", "error", "output"});
otherwise a summary. The exit status is 1 when any proof failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import runpy
import signal
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

import torch
import torch.distributed
import torch.utils.data  # imported once here, so that no single proof's timing pays for it

CORPUS = Path(__file__).resolve().parent / "corpus"


@dataclass
class ProofResult:
    case: str
    ok: bool
    seconds: float
    error: str
    output: str


class ProofTimeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise ProofTimeout("the proof ran past its time limit")


def _reset_torch() -> None:
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
    torch.set_default_dtype(torch.float32)
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # a proof that left a broken group behind must not fail the next one
        pass


def run_proof(case_dir: Path, timeout: int) -> ProofResult:
    proof = case_dir / "proof.py"
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    saved_modules = set(sys.modules)
    out = io.StringIO()
    error = ""
    started = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                runpy.run_path(str(proof), run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    error = f"SystemExit({exc.code!r})"
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = "".join(traceback.format_exception(exc)[-3:]).strip()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        seconds = time.perf_counter() - started
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        for name in set(sys.modules) - saved_modules:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(str(CORPUS)):
                del sys.modules[name]
        _reset_torch()
    return ProofResult(case=case_dir.name, ok=not error, seconds=round(seconds, 3), error=error, output=out.getvalue()[-2000:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run corpus proofs in one process.")
    p.add_argument("cases", nargs="*", type=Path, help="case folders (default: every case of the corpus)")
    p.add_argument("--json", action="store_true", help="print one JSON object per proof")
    p.add_argument("--timeout", type=int, default=30, help="seconds per proof (default 30)")
    args = p.parse_args(argv)
    dirs = args.cases or sorted(d for d in CORPUS.iterdir() if (d / "proof.py").is_file())
    torch.set_num_threads(1)  # proofs are tiny; threads only add start-up noise
    # The first optimizer built in a process lazily imports torch._dynamo (about 0.8 s): pay it once here.
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    failed = 0
    for d in dirs:
        res = run_proof(d.resolve(), args.timeout)
        failed += not res.ok
        if args.json:
            print(json.dumps(asdict(res)), flush=True)
        elif not res.ok:
            print(f"FAIL {res.case} ({res.seconds:.2f} s)\n{res.error}\n{res.output}", flush=True)
        else:
            print(f"ok   {res.case} ({res.seconds:.2f} s)", flush=True)
    if not args.json:
        print(f"{len(dirs) - failed}/{len(dirs)} proofs hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
