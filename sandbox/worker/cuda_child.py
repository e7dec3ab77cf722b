"""A probe on CUDA, in a freshly executed interpreter (never a fork of the warm worker).

The isolation of `sandbox.isolate` is already in place: this process was exec'd by the
probe process after it entered its namespaces and dropped its privileges.
"""

from __future__ import annotations

import json
import sys


def main(request_path: str, result_fd: int) -> None:
    from review_copies.sandbox import protocol

    try:
        with open(request_path, encoding="utf-8") as fh:
            request = protocol.decode(protocol.ProbeRequest, json.load(fh))
        import torch

        if not torch.cuda.is_available():
            answer = protocol.ProbeAnswer(ok=False, error="CUDA is not available in the probe process")
        else:
            # Keep a runaway probe from taking the whole GPU from the user's other work.
            torch.cuda.set_per_process_memory_fraction(0.25)
            # Before the subject's code, as the warm worker does: an optimizer's first step
            # imports it otherwise, and an import that fails half-way there (measured on
            # torch 2.11+cu130, when the probe had no user name) cannot be retried: torch
            # then raises "Artifact of type=precompile already registered" at every step.
            import torch._dynamo

            from review_copies.sandbox.worker import check

            answer = protocol.ProbeAnswer(ok=True, result=check.run(request))
    except BaseException as exc:
        answer = protocol.ProbeAnswer(ok=False, error=f"CUDA probe failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    protocol.write_frame(result_fd, answer)
    sys.stdout.flush()
