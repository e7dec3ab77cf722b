"""A progress line on standard error while a long review runs (only on a terminal).

Quiet for the first seconds, so a pull request's review prints nothing; then one line,
rewritten in place, that is erased when the review ends."""

from __future__ import annotations

import time
from typing import IO

from review_copies.model.settings import PROG

# Seconds before the line first appears, and between two updates.
QUIET_FOR = 1.5
EVERY = 0.2


class Progress:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, files_done: int) -> None:
        now = time.monotonic()
        if now - self.started < QUIET_FOR or now - self.last < EVERY:
            return
        self.last = now
        self.shown = True
        self.stream.write(f"\r\033[K{PROG}: {files_done} file{'s' * (files_done != 1)} reviewed ({now - self.started:.0f} s)")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
