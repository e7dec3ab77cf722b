"""Length-prefixed JSON frames between the reviewer, the zygote and the probes.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Readers take a
size cap: a probe that prints gigabytes gets its answer cut, not the reviewer's memory.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other side closed, sent garbage, exceeded the size cap, or ran out of time."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), default=str).encode()
    return HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any]) -> None:
    data = memoryview(encode(message))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameError("timed out")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise FrameError("timed out")
        chunk = os.read(fd, min(n - got, 1 << 16))
        if not chunk:
            raise FrameError("closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, cap: int, deadline: float | None = None) -> dict[str, Any]:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if size > cap:
        raise FrameError(f"answer of {size} bytes is over the {cap}-byte cap")
    try:
        message = json.loads(_read_exact(fd, size, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise FrameError("not a JSON object")
    return message
