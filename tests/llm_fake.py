"""A fake OpenAI-compatible server over real HTTP (pytest-httpserver), and a throwaway git
repository to review, for the LLM tests. The real `openai` client talks to it."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from review_copies.cli import main

DATA = Path(__file__).parent / "llm_data"
Handler = Callable[[dict[str, Any], int], Response]


def completion(
    content: str, prompt_tokens: int | None = 900, completion_tokens: int | None = 120, finish_reason: str = "stop", cached_tokens: int | None = None
) -> Response:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
    }
    if prompt_tokens is not None and completion_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
        if cached_tokens is not None:
            # As OpenAI reports a prompt prefix it had cached.
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return Response(json.dumps(body), status=200, content_type="application/json")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return Response(json.dumps(body), status=status, content_type="application/json", headers=headers or {})


def _chunks(completion: dict[str, Any], usage: bool, pieces: int = 3) -> list[dict[str, Any]]:
    choice = completion["choices"][0]
    content = choice["message"].get("content") or ""
    step = max(1, -(-len(content) // pieces))
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"], "model": completion["model"]}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    out += [{**base, "choices": [{"index": 0, "delta": {"content": content[i : i + step]}, "finish_reason": None}]} for i in range(0, len(content), step)]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}]})
    if usage and completion.get("usage"):
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


def as_stream(completion: dict[str, Any], usage: bool, pieces: int = 3, delay: float = 0.0) -> Response:
    def events():
        for chunk in _chunks(completion, usage, pieces):
            if delay:
                time.sleep(delay)
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    return Response(events(), status=200, content_type="text/event-stream")


def refusing(field: str, message: str) -> Handler:
    """A server that answers 400 with `message` to every request carrying `field`, and an
    empty finding list to the others."""

    def handle(body: dict[str, Any], n: int) -> Response:
        return error(400, message) if field in body else completion(answer())

    return handle


def streamed_slowly(content: str, pieces: int, delay: float) -> Handler:
    """A slow local model that writes its answer in `pieces`, one every `delay` seconds."""

    def handle(body: dict[str, Any], n: int) -> Response:
        done = json.loads(completion(content).get_data(as_text=True))
        if not body.get("stream"):
            time.sleep(delay * pieces)  # the whole answer at once, as late as the last piece
            return completion(content)
        return as_stream(done, usage=bool((body.get("stream_options") or {}).get("include_usage")), pieces=pieces, delay=delay)

    return handle


def answer(*findings: dict[str, Any]) -> str:
    return json.dumps({"findings": list(findings)})


def recorded(name: str) -> str:
    """A recorded model answer from tests/llm_data/answers."""
    return (DATA / "answers" / name).read_text(encoding="utf-8")


@dataclass
class FakeOpenAI:
    server: HTTPServer
    handler: Handler | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.server.url_for("/v1")

    @property
    def count(self) -> int:
        return len(self.bodies)

    def _serve(self, request: Request) -> Response:
        body = json.loads(request.get_data(as_text=True) or "{}")
        with self._lock:
            self.bodies.append(body)
            n = len(self.bodies)
        if self.handler is None:
            return error(500, "no handler")
        response = self.handler(body, n)
        if body.get("stream") and response.status_code == 200 and response.mimetype == "application/json":
            # As llama.cpp, Ollama and vLLM answer `stream: true`: the same completion as
            # server-sent events, a usage chunk last when `stream_options` asks for it.
            return as_stream(json.loads(response.get_data(as_text=True)), usage=bool((body.get("stream_options") or {}).get("include_usage")))
        return response

    @staticmethod
    def user_message(body: dict[str, Any]) -> str:
        return next(m["content"] for m in body["messages"] if m["role"] == "user")

    @staticmethod
    def system_message(body: dict[str, Any]) -> str:
        return next(m["content"] for m in body["messages"] if m["role"] == "system")


def start_fake() -> FakeOpenAI:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    fake = FakeOpenAI(server)
    server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(fake._serve)
    return fake


def by_file(answers: dict[str, str]) -> Handler:
    """Answer each request by the first file (of `answers`) its prompt shows."""

    def handle(body: dict[str, Any], n: int) -> Response:
        user = FakeOpenAI.user_message(body)
        for path, content in answers.items():
            if f'file: "{path}"' in user:
                return completion(content)
        return completion(answer())

    return handle


def slow(seconds: float, then: Handler) -> Handler:
    def handle(body: dict[str, Any], n: int) -> Response:
        time.sleep(seconds)
        return then(body, n)

    return handle


# --------------------------------------------------------------------------- repositories


def make_repo(root: Path, base: dict[str, str], head: dict[str, str], config: str = "") -> Path:
    """A repository whose HEAD commit changes `base` into `head` (path -> text)."""
    repo = git.Repo.init(root)
    with repo.config_writer() as cfg:
        cfg.set_value("user", "name", "Test")
        cfg.set_value("user", "email", "test@example.com")
    for files in (base, head):
        for path, text in files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if config:
            (root / "pyproject.toml").write_text(config, encoding="utf-8")
        repo.index.add([*files, *(["pyproject.toml"] if config else [])])
        repo.index.commit("change")
    return root


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def review(repo: Path, *args: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    status = main(["--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--no-sandbox", *args], stdout=out, stderr=err)
    return Run(status, out.getvalue(), err.getvalue())


def llm_config(**keys: Any) -> str:
    """A [tool.review-copies] table with fast retries for tests, plus `keys`."""
    table = {"llm-backoff": 0.01, "llm-timeout": 5, "llm-retries": 2, **keys}
    lines = ["[tool.review-copies]"] + [f"{key.replace('_', '-')} = {json.dumps(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"
