"""The worker's serving loop: requests in, answers out, in the order probes finish.

Two ways in. Over the reviewer's pipes, for one review: the worker ends when the reviewer
closes them. Or kept warm, over a Unix socket that later reviews connect to (`--serve`):
each connection is a channel of its own, the worker says hello to each, and it ends after
`--idle` seconds without a connection or a probe. A channel that closes takes its probes
with it (killed) and its queued requests (dropped).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field

from review_copies.sandbox import isolate, protocol
from review_copies.sandbox.worker.zygote import REQUEST_CAP, Running, Zygote


@dataclass(eq=False)
class Channel:
    """One reviewer: the fd requests come in on, the fd answers go out on."""

    read_fd: int
    write_fd: int
    sock: socket.socket | None = None
    open: bool = True

    def send(self, message: object) -> None:
        if not self.open:
            return
        try:
            protocol.write_frame(self.write_fd, message)
        except OSError:
            self.close()  # the reviewer went away

    def close(self) -> None:
        if self.open and self.sock is not None:
            self.sock.close()
        self.open = False


@dataclass
class Server:
    zygote: Zygote
    channels: list[Channel]
    listener: socket.socket | None = None
    idle: float = 0.0
    running: list[tuple[Channel, Running]] = field(default_factory=list)
    waiting: list[tuple[Channel, protocol.ProbeRequest]] = field(default_factory=list)

    def _launch_waiting(self) -> None:
        while self.waiting and (not self.running or self.zygote.parallel):
            channel, request = self.waiting.pop(0)
            launched = self.zygote.launch(request)
            if isinstance(launched, protocol.ProbeAnswer):
                channel.send(launched)
            else:
                self.running.append((channel, launched))

    def _drop(self, channel: Channel) -> None:
        channel.close()
        for owner, run in self.running:
            if owner is channel:
                self.zygote.kill(run.pid)
        self.waiting = [(c, r) for c, r in self.waiting if c is not channel]

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        channel = Channel(conn.fileno(), conn.fileno(), conn)
        self.channels.append(channel)
        channel.send(self.zygote.hello())

    def _take(self, channel: Channel) -> None:
        """One request from a channel; the channel ends when the reviewer is gone or says exit."""
        try:
            request = protocol.read_frame(channel.read_fd, REQUEST_CAP)
        except (protocol.FrameError, OSError):
            self._drop(channel)
            return
        if request.get("op") == "exit":
            self._drop(channel)
            return
        try:
            self.waiting.append((channel, protocol.decode(protocol.ProbeRequest, request.get("request"))))
        except Exception as exc:  # the worker must outlive any request it cannot read
            given = request.get("request")
            ident = given.get("id") if isinstance(given, dict) and isinstance(given.get("id"), int) else 0
            channel.send(protocol.ProbeAnswer(ok=False, error=f"worker error: {type(exc).__name__}: {exc}", id=ident))

    def _over(self, idle_since: float) -> bool:
        if self.running or self.waiting or self.channels:
            return False
        return self.listener is None or time.monotonic() - idle_since >= self.idle

    def run(self) -> None:
        idle_since = time.monotonic()
        while not self._over(idle_since):
            self._launch_waiting()
            fds = [c.read_fd for c in self.channels]
            fds += [fd for _, run in self.running for fd in run.open_fds]
            if self.listener is not None:
                fds.append(self.listener.fileno())
            deadlines = [run.deadline for _, run in self.running]
            if self.listener is not None and not self.channels and not self.running:
                deadlines.append(idle_since + self.idle)
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select(fds, [], [], timeout) if fds else ([], [], [])
            if self.listener is not None and self.listener.fileno() in ready:
                self._accept()
            for channel in [c for c in self.channels if c.read_fd in ready]:
                self._take(channel)
            for _, run in self.running:
                for fd in [fd for fd in ready if fd in run.open_fds]:
                    self.zygote.read(run, fd)
            for channel, run in [(c, r) for c, r in self.running if r.done()]:
                self.running.remove((channel, run))
                channel.send(self.zygote.finish(run))
            if any(not c.open for c in self.channels):
                self.channels = [c for c in self.channels if c.open]
                if not self.channels:
                    idle_since = time.monotonic()


@dataclass
class Listening:
    sock: socket.socket
    path: str
    inode: int


def listen(path: str) -> Listening | None:
    """The socket later reviews connect to; None when another worker already serves it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
        inode = os.stat(path).st_ino
    except OSError:
        listener.close()
        return None
    finally:
        os.umask(old)
    listener.listen(16)
    listener.setblocking(False)
    return Listening(listener, path, inode)


def stop_listening(listening: Listening) -> None:
    """Give up the name (unless another worker holds it now) and close the socket."""
    with contextlib.suppress(OSError):
        if os.stat(listening.path).st_ino == listening.inode:
            os.unlink(listening.path)
    listening.sock.close()


def _option(name: str) -> str | None:
    prefix = f"--{name}="
    return next((a[len(prefix):] for a in sys.argv[1:] if a.startswith(prefix)), None)


def main() -> None:
    isolation = "none" if "--isolation=none" in sys.argv else "auto"
    path = _option("serve")
    channel_in, channel_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # stray prints must not corrupt the channel
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    isolate.set_dumpable(False)
    zygote = Zygote(isolation)
    try:
        if path is None:
            zygote.warm()
            protocol.write_frame(channel_out, zygote.hello())
            Server(zygote, [Channel(channel_in, channel_out)]).run()
            return
        # Kept warm for later reviews: only where no probe can reach the socket.
        if not isolate.hidden_from_probes(zygote.caps, path):
            return
        listening = listen(path)
        if listening is None:
            return  # another worker serves this name
        try:
            zygote.warm()
            Server(zygote, [], listening.sock, float(_option("idle") or 0)).run()
        finally:
            stop_listening(listening)
    finally:
        shutil.rmtree(zygote.root, ignore_errors=True)
        home = os.environ.get("HOME", "")
        if path is not None and os.path.basename(home).startswith("review-copies-worker-"):
            shutil.rmtree(home, ignore_errors=True)  # made for this worker by the reviewer that started it


if __name__ == "__main__":
    main()
