"""Answers already paid for, on disk, keyed by the model and a hash of the whole prompt.

A re-run on the same head sends byte-identical prompts, so it is answered from here and
costs nothing. Only answers that parsed as a JSON object are kept: a garbled answer is
asked again next time rather than replayed. The cache is an optimisation: when its
folder cannot be written the review goes on without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bump when the meaning of a cached answer changes (a new answer schema, say).
CACHE_VERSION = 1


@dataclass(frozen=True)
class Cached:
    content: str
    prompt_tokens: int
    completion_tokens: int


def request_key(model: str, endpoint: str, parts: dict[str, Any]) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "endpoint": endpoint, **parts}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.problem: str | None = None
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Cached | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Cached(str(data["content"]), int(data["prompt_tokens"]), int(data["completion_tokens"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, answer: Cached) -> None:
        path = self._path(key)
        if path is None or self.problem is not None:
            return
        record = {"content": answer.content, "prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens}
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write beside the target and rename: a reader never sees half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            with self._lock:
                self.problem = self.problem or f"the LLM cache in {self.root} cannot be written ({exc.strerror or exc}); answers were not cached"
