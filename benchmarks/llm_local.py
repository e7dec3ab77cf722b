"""End to end against a real local OpenAI-compatible server: what the LLM path does there.

It starts llama-cpp-python's server on a GGUF model (or uses one already running), puts a
counting proxy on loopback in front of it, and runs the `review-copies` command on a set
of reviews, each a temporary git repository with the change in its working tree:
- the bundled demo change (`examples/demo`),
- the first changed case of each kind in the labeled corpus (`benchmarks/corpus`),
- one large change made from torch's own sources (as `benchmarks/llm_tokens.py` makes it).

Per review it reports the response format the tool settled on, the requests it sent, the
prompt and completion tokens and the share served from the server's prefix cache (from the
report's stats), the wall time, the coverage (tensor hunks the LLM reviewed and did not),
the findings the LLM added and those it answered that were dropped, with the reasons. The
proxy counts every POST to chat/completions and whether an identical request body was sent
twice (a prompt the server would process twice), and, where it started the server, how
much of each prompt the server reused from the one before (its log's prefix-match counts:
llama-cpp-python reports no cached tokens in `usage`). The sandbox is off: this measures
the LLM path alone.

Not part of CI: building llama-cpp-python from source takes most of an hour on 2 cores.
See README.md ("Measuring the LLM path against a real local server") for the install.

    python benchmarks/llm_local.py --model-file SmolLM2-135M-Instruct.Q4_1.gguf \\
        --server-python /path/to/llama-venv/bin/python [--json out.json]
    python benchmarks/llm_local.py --base-url http://127.0.0.1:8080/v1 --model local
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import git  # noqa: E402
from llm_tokens import Case, corpus_cases, large_cases, write_tree  # noqa: E402

# What README.md tells a user of a local server to set (one slot, slow answers).
LOCAL_CONFIG = """[tool.review-copies]
llm-request-tokens = 6000
llm-timeout = 300
llm-concurrency = 1
llm-cache-dir = ""
"""
KINDS = ("alias", "inplace", "retain", "snapshot", "copyctor", "numpy", "redundant", "neg")


# --------------------------------------------------------------------------- the proxy


@dataclass
class Exchange:
    digest: str
    status: int
    seconds: float
    response_format: str


@dataclass
class Ledger:
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> list[Exchange]:
        with self.lock:
            out, self.exchanges = self.exchanges, []
        return out


def _proxy(upstream: tuple[str, int], ledger: Ledger) -> http.server.ThreadingHTTPServer:
    """A loopback HTTP proxy that passes every request through, streaming the answer as it
    comes, and writes down each chat/completions request it saw."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _pass(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            started = time.perf_counter()
            conn = http.client.HTTPConnection(*upstream, timeout=3600)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                piece = resp.read1(65536)
                if not piece:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            conn.close()
            if self.command == "POST" and self.path.rstrip("/").endswith("chat/completions"):
                try:
                    asked = json.loads(body).get("response_format") or {}
                    fmt = asked.get("type", "none") + ("+schema" if "schema" in asked else "")
                except ValueError:
                    fmt = "?"
                with ledger.lock:
                    ledger.exchanges.append(Exchange(hashlib.sha256(body).hexdigest(), resp.status, time.perf_counter() - started, fmt))

        do_GET = do_POST = _pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# --------------------------------------------------------------------------- the server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen | None, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server ended with exit code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise SystemExit(f"no server answered at {url} within {seconds:.0f} s")


def start_server(python: str, model_file: Path, n_ctx: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    command = [python, "-m", "llama_cpp.server", "--model", str(model_file), "--model_alias", "local",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    proc = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    _wait_for(url, proc, 300)
    return proc, url


# --------------------------------------------------------------------------- reviews


def demo_case() -> Case:
    """The README's example change: train.py as changed, and the base it was changed from."""
    after = (ROOT / "examples" / "demo" / "train.py").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
        (folder / "examples" / "demo").mkdir(parents=True)
        (folder / "examples" / "demo" / "train.py").write_text(after, encoding="utf-8")
        subprocess.run(["git", "apply", "-R", str(ROOT / "examples" / "demo" / "change.diff")], cwd=folder, check=True)
        before = (folder / "examples" / "demo" / "train.py").read_text(encoding="utf-8")
    return Case("demo", "demo", {"train.py": before}, {"train.py": after})


def chosen_cases(limit_large: int) -> list[Case]:
    cases = [demo_case()]
    changed = [c for c in corpus_cases(ROOT / "benchmarks" / "corpus") if c.before and c.before != c.after]
    for kind in KINDS:
        first = next((c for c in changed if c.name.split("-")[0] == kind), None)
        if first is not None:
            cases.append(first)
    cases += list(large_cases())[:limit_large]
    return cases


_PREFIX = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def prefix_reuse(log: Path | None, offset: int) -> tuple[int, int, int]:
    """(tokens the server reused from its previous prompt, tokens it evaluated, new offset),
    from what llama-cpp-python's server logged past `offset`. Its `usage` does not report
    cached tokens, so the report's share is 0 there although the prefix is reused."""
    if log is None or not log.is_file():
        return 0, 0, offset
    with log.open("rb") as fh:
        fh.seek(offset)
        text = fh.read().decode("utf-8", "replace")
        end = fh.tell()
    pairs = [(int(a), int(b)) for a, b in _PREFIX.findall(text)]
    return sum(a for a, _ in pairs), sum(b for _, b in pairs), end


@dataclass
class Reviewed:
    name: str
    exit_code: int
    seconds: float
    response_format: str | None
    requests: int
    posts: int
    repeated_bodies: int
    statuses: dict[str, int]
    formats_sent: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    tensor_hunks: int
    llm_hunks_reviewed: int
    llm_hunks_not_reviewed: int
    coverage: list[str]
    llm_findings: int
    findings: list[str]
    dropped: list[str]
    fixes_dropped: int
    server_prefix_reused: int = 0
    server_prompt_evaluated: int = 0
    error: str = ""


def review(case: Case, url: str, model: str, ledger: Ledger) -> Reviewed:
    with tempfile.TemporaryDirectory(prefix="llm-local-") as tmp:
        folder = Path(tmp) / "repo"
        repo = git.Repo.init(folder)
        with repo.config_writer() as cfg:
            cfg.set_value("user", "name", "bench")
            cfg.set_value("user", "email", "bench@example.invalid")
        write_tree(folder, {**case.before, "pyproject.toml": LOCAL_CONFIG})
        repo.git.add(A=True)
        repo.index.commit("base")
        for path in case.before.keys() - case.after.keys():
            (folder / path).unlink()
        write_tree(folder, case.after)
        repo.git.add(A=True)  # new files too: the review reads the working tree against HEAD
        env = {**os.environ, "OPENAI_API_KEY": "local", "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        ledger.take()
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "review_copies", "--format", "json", "--no-sandbox", "--fail-on", "none", "--base-url", url, "--model", model],
            cwd=folder, env=env, capture_output=True, text=True, timeout=3600,
        )
        seconds = time.perf_counter() - started
    exchanges = ledger.take()
    digests = Counter(e.digest for e in exchanges)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"stats": {}, "findings": [], "dropped": [], "coverage": []}
    stats = report["stats"]
    return Reviewed(
        name=case.name,
        exit_code=proc.returncode,
        seconds=round(seconds, 1),
        response_format=stats.get("llm_response_format"),
        requests=stats.get("llm_requests", 0),
        posts=len(exchanges),
        repeated_bodies=sum(n - 1 for n in digests.values()),
        statuses=dict(Counter(str(e.status) for e in exchanges)),
        formats_sent=dict(Counter(e.response_format for e in exchanges)),
        prompt_tokens=stats.get("prompt_tokens", 0),
        completion_tokens=stats.get("completion_tokens", 0),
        cached_prompt_tokens=stats.get("llm_cached_prompt_tokens", 0),
        tensor_hunks=stats.get("tensor_hunks", 0),
        llm_hunks_reviewed=stats.get("llm_hunks_reviewed", 0),
        llm_hunks_not_reviewed=stats.get("llm_hunks_not_reviewed", 0),
        coverage=report.get("coverage", []),
        llm_findings=stats.get("llm_findings", 0),
        findings=[f"{f['path']}:{f['line']} {f['rule']} {f['category']} ({f.get('source', '?')})" for f in report["findings"]],
        dropped=[f"{d['path']}:{d['line']} {d['category']}: {d['reason']}" for d in report["dropped"]],
        fixes_dropped=stats.get("llm_fixes_dropped", 0),
        error=proc.stderr.strip()[-600:] if proc.returncode not in (0, 1) else "",
    )


def _table(rows: list[Reviewed]) -> str:
    head = (f"{'review':<32} {'format':<12} {'req':>3} {'POST':>4} {'twice':>5} {'prompt':>7} {'compl':>6} {'cached':>6} {'reused':>6} "
            f"{'secs':>6} {'hunks':>7} {'llm+':>4} {'drop':>4}")
    lines = [head, "-" * len(head)]
    for r in rows:
        cached = f"{r.cached_prompt_tokens / r.prompt_tokens:.0%}" if r.prompt_tokens else "-"
        hunks = f"{r.llm_hunks_reviewed}/{r.llm_hunks_reviewed + r.llm_hunks_not_reviewed}"
        seen = r.server_prefix_reused + r.server_prompt_evaluated
        reused = f"{r.server_prefix_reused / seen:.0%}" if seen else "-"
        lines.append(
            f"{r.name[:32]:<32} {str(r.response_format)[:12]:<12} {r.requests:>3} {r.posts:>4} {r.repeated_bodies:>5} {r.prompt_tokens:>7} "
            f"{r.completion_tokens:>6} {cached:>6} {reused:>6} {r.seconds:>6.1f} {hunks:>7} {r.llm_findings:>4} {len(r.dropped):>4}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-file", type=Path, help="a GGUF model: start llama-cpp-python's server on it")
    parser.add_argument("--server-python", default=sys.executable, help="the Python that has llama-cpp-python[server] (default: this one)")
    parser.add_argument("--n-ctx", type=int, default=16384, help="the server's context size")
    parser.add_argument("--base-url", help="use a server already running there instead")
    parser.add_argument("--model", default="local", help="the model name to ask for")
    parser.add_argument("--large", type=int, default=1, help="how many large changes from torch's sources to review")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    if (args.model_file is None) == (args.base_url is None):
        parser.error("give --model-file or --base-url")
    if args.model_file is not None and not args.model_file.is_file():
        parser.error(f"{args.model_file} is not a file")

    server = None
    log = Path(tempfile.mkdtemp(prefix="llm-local-log-")) / "server.log"
    if args.model_file is not None:
        server, upstream_url = start_server(args.server_python, args.model_file, args.n_ctx, log)
    else:
        upstream_url = args.base_url.rstrip("/")
        _wait_for(upstream_url, None, 30)
    parts = urllib.parse.urlsplit(upstream_url)
    ledger = Ledger()
    proxy = _proxy((parts.hostname or "127.0.0.1", parts.port or 80), ledger)
    url = f"http://127.0.0.1:{proxy.server_address[1]}{parts.path}"
    rows: list[Reviewed] = []
    offset = log.stat().st_size if log.is_file() else 0
    try:
        for case in chosen_cases(args.large):
            row = review(case, url, args.model, ledger)
            reused, evaluated, offset = prefix_reuse(log if server is not None else None, offset)
            row.server_prefix_reused, row.server_prompt_evaluated = reused, evaluated
            rows.append(row)
            print(f"{row.name}: {row.seconds:.1f} s, {row.posts} requests, format {row.response_format}", file=sys.stderr, flush=True)
    finally:
        proxy.shutdown()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    print(_table(rows))
    for r in rows:
        for line in r.coverage:
            print(f"  {r.name}: coverage: {line}")
        for f in r.findings:
            print(f"  {r.name}: finding {f}")
        for d in r.dropped:
            print(f"  {r.name}: dropped {d}")
        if r.error:
            print(f"  {r.name}: exit {r.exit_code}: {r.error}")
    summary = {
        "reviews": len(rows),
        "requests": sum(r.posts for r in rows),
        "prompts_sent_twice": sum(r.repeated_bodies for r in rows),
        "hunks_reviewed": sum(r.llm_hunks_reviewed for r in rows),
        "hunks_not_reviewed": sum(r.llm_hunks_not_reviewed for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "cached_prompt_tokens": sum(r.cached_prompt_tokens for r in rows),
        "server_prefix_reused": sum(r.server_prefix_reused for r in rows),
        "server_prompt_evaluated": sum(r.server_prompt_evaluated for r in rows),
        "completion_tokens": sum(r.completion_tokens for r in rows),
        "llm_findings": sum(r.llm_findings for r in rows),
        "dropped": sum(len(r.dropped) for r in rows),
        "seconds": round(sum(r.seconds for r in rows), 1),
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"reviews": [asdict(r) for r in rows], "summary": summary, "server_log": str(log)}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
