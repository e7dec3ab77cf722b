"""Verdicts already paid for, on disk: a re-review of the same code (a new push that leaves
a finding's function alone, a pre-commit run after a commit) answers from here and starts
no probe.

The key is everything a verdict depends on: the subject as sent (the function as written
and as fixed, with its kept context and the callers' inputs), the recipes, the LLM's
probe, the claims, the limits, the device, the torch version, and a fingerprint of the
sandbox's own code (recipes, worker, verdict rules), so that a new release never replays
an old verdict. Only answers of probes that finished are kept: a probe killed at a limit
may be the machine's fault. Like the LLM cache, it is an optimisation: a folder that
cannot be written only costs the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from review_copies.sandbox import protocol
from review_copies.sandbox.recipes.base import Decision

CACHE_VERSION = 1


@cache
def code_fingerprint() -> str:
    """A hash of the sandbox package's sources: recipes, worker, protocol and verdicts."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@cache
def torch_version(python: str) -> str:
    """The worker's torch, without importing it here (the reviewer never imports torch);
    another interpreter's is not known, and its verdicts are keyed by its path instead."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return f"python:{os.path.realpath(python)}"
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def request_key(request: protocol.ProbeRequest, python: str) -> str:
    parts = {
        "v": CACHE_VERSION,
        "code": code_fingerprint(),
        "torch": torch_version(python),
        "request": protocol.encode(request),
    }
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class VerdictCache:
    root: Path | None
    hits: int = 0
    problem: str | None = None

    def _path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Decision | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            decision = Decision(str(data["status"]), str(data["evidence"]), str(data.get("recipe", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.hits += 1
        return decision

    def put(self, key: str, decision: Decision) -> None:
        path = self._path(key)
        if path is None or self.problem is not None:
            return
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"status": decision.status, "evidence": decision.evidence, "recipe": decision.recipe}, handle, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            self.problem = f"the sandbox cache in {self.root} cannot be written ({exc.strerror or exc}); verdicts were not cached"
