"""The client against a fake OpenAI-compatible server, its retry policy, the options, and
the request planner."""

from __future__ import annotations

from pathlib import Path

import pytest

from review_copies.llm.client import MAX_WAIT_SECONDS, ModelClient, Prompt, RequestFailed, Unavailable, backoff_wait, retry_after
from review_copies.llm.options import LLMOptions, build_options
from review_copies.llm.prompts import FileBlock
from review_copies.llm.requests import plan_requests
from review_copies.llm.tokens import estimate_tokens
from review_copies.model.errors import UsageError
from review_copies.review.hunks import TensorHunk
from tests.llm_fake import FakeOpenAI, answer, completion, error, refusing, slow, start_fake, streamed_slowly

PROMPT = Prompt(system="system", user="user", schema={"type": "object"}, schema_note="\nschema")


@pytest.fixture(scope="module")
def _server():
    server = start_fake()
    yield server
    server.server.stop()


@pytest.fixture
def fake(_server: FakeOpenAI) -> FakeOpenAI:
    _server.bodies.clear()
    _server.handler = None
    return _server


def client(fake: FakeOpenAI, **opts) -> tuple[ModelClient, list[float]]:
    waits: list[float] = []
    options = LLMOptions(model="fake-model", api_key="sk-test", base_url=fake.url, timeout=2, retries=2, backoff=0.01, **opts)
    return ModelClient(options, sleep=waits.append), waits


def test_a_good_answer_comes_back_with_its_usage(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: completion(answer(), prompt_tokens=321, completion_tokens=12)
    model, _ = client(fake)
    got = model.complete(PROMPT)
    assert (got.content, got.prompt_tokens, got.completion_tokens, got.mode) == ('{"findings": []}', 321, 12, "json_schema")
    assert model.calls == 1 and fake.bodies[0]["max_tokens"] == 2000


def test_an_answer_without_usage_leaves_the_counts_to_estimate(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: completion(answer(), prompt_tokens=None, completion_tokens=None)
    got, _ = client(fake)
    assert got.complete(PROMPT).prompt_tokens is None


def test_a_model_that_wants_max_completion_tokens_gets_it(fake: FakeOpenAI) -> None:
    fake.handler = refusing("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
    model, _ = client(fake)
    model.complete(PROMPT)
    model.complete(PROMPT)
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in fake.bodies] == [(True, None), (False, 2000), (False, 2000)]


def test_a_server_that_takes_no_response_format_at_all_gets_the_schema_in_the_prompt(fake: FakeOpenAI) -> None:
    fake.handler = refusing("response_format", "unknown field response_format")
    model, _ = client(fake)
    got = model.complete(PROMPT)
    assert got.mode == "none"
    assert fake.bodies[-1]["messages"][0]["content"] == "system\nschema"


def test_a_500_that_names_the_response_format_steps_down_before_any_retry(fake: FakeOpenAI) -> None:
    """llama-cpp-python's server answers `json_schema` with HTTP 500 and a validation error
    naming `response_format`, and accepts `json_object` (issue 16)."""
    def handle(body, n):
        if body.get("response_format", {}).get("type") == "json_schema":
            return error(500, "1 validation error for CreateChatCompletionRequest\nresponse_format\n  Input should be a valid dictionary")
        return completion(answer())

    fake.handler = handle
    model, waits = client(fake)
    got = model.complete(PROMPT)
    assert got.mode == "json_object" and waits == [] and model.retries == 0
    assert [b.get("response_format", {}).get("type") for b in fake.bodies] == ["json_schema", "json_object"]
    # The schema goes beside `json_object`: llama.cpp's servers enforce it as a grammar, so
    # even a small local model answers in the shape the validator keeps.
    assert fake.bodies[1]["response_format"]["schema"] == PROMPT.schema


def test_a_server_that_refuses_the_schema_beside_json_object_gets_plain_json_object(fake: FakeOpenAI) -> None:
    def handle(body, n):
        fmt = body.get("response_format", {})
        if fmt.get("type") == "json_schema":
            return error(400, "response_format of type 'json_schema' is not supported")
        if "schema" in fmt:
            return error(400, "response_format.schema: extra inputs are not permitted")
        return completion(answer())

    fake.handler = handle
    model, waits = client(fake)
    got = model.complete(PROMPT)
    assert got.mode == "json_object" and waits == []
    assert [sorted(b.get("response_format", {})) for b in fake.bodies] == [["json_schema", "type"], ["schema", "type"], ["type"]]
    assert fake.bodies[-1]["messages"][0]["content"] == "system\nschema"


def test_a_500_that_says_nothing_of_the_format_is_retried_as_before(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: error(500, "upstream failure") if n < 2 else completion(answer())
    model, waits = client(fake)
    assert model.complete(PROMPT).mode == "json_schema" and len(waits) == 1


def test_a_local_server_past_the_timeout_is_not_asked_again(fake: FakeOpenAI) -> None:
    """A single-slot local server keeps computing an abandoned request: a retry would wait
    behind it (issue 16). The fake listens on loopback, as llama.cpp's server does."""
    fake.handler = slow(1.5, lambda body, n: completion(answer()))
    model = ModelClient(LLMOptions(model="m", api_key="k", base_url=fake.url, timeout=0.3, retries=2, backoff=0.01), sleep=lambda s: None)
    with pytest.raises(Unavailable, match="a local server is not asked again"):
        model.complete(PROMPT)
    assert fake.count == 1 and model.retries == 0


def test_a_slow_local_model_that_keeps_writing_is_waited_for(fake: FakeOpenAI) -> None:
    """Six pieces a quarter second apart: 1.5 s in all against a 0.5 s timeout. Streamed,
    each piece resets the read timeout and the one request is answered; a whole answer
    sent at once would have been given up on (and the slot kept busy)."""
    fake.handler = streamed_slowly(answer(), pieces=6, delay=0.25)
    waits: list[float] = []
    model = ModelClient(LLMOptions(model="m", api_key="k", base_url=fake.url, timeout=0.5, retries=2, backoff=0.01), sleep=waits.append)
    got = model.complete(PROMPT)
    assert got.content == '{"findings": []}' and got.finish_reason == "stop"
    assert (got.prompt_tokens, got.completion_tokens) == (900, 120)
    assert len(fake.bodies) == 1 and fake.bodies[0]["stream"] is True and waits == []


def test_a_server_that_refuses_stream_options_streams_without_usage(fake: FakeOpenAI) -> None:
    fake.handler = refusing("stream_options", "Unrecognized request argument supplied: stream_options")
    model, _ = client(fake)
    got = model.complete(PROMPT)
    assert got.content == '{"findings": []}' and got.prompt_tokens is None
    assert [("stream_options" in b) for b in fake.bodies] == [True, False]


def test_only_a_local_endpoint_with_the_hosted_timeout_is_warned_about() -> None:
    assert LLMOptions(model="m", api_key="k", base_url="http://127.0.0.1:8080/v1").local_with_hosted_defaults()
    assert not LLMOptions(model="m", api_key="k", base_url="http://localhost:8080/v1", timeout=600).local_with_hosted_defaults()
    assert not LLMOptions(model="m", api_key="k", base_url="https://api.example.com/v1").local_with_hosted_defaults()


def test_a_prompt_too_long_for_the_context_fails_that_request_only(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: error(400, "This model's maximum context length is 8192 tokens.")
    model, _ = client(fake)
    with pytest.raises(RequestFailed, match="maximum context length"):
        model.complete(PROMPT)
    assert fake.count == 1 and model.down is None


def test_a_refused_key_stops_everything_without_retrying(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: error(401, "Incorrect API key provided")
    model, waits = client(fake)
    with pytest.raises(Unavailable, match="HTTP 401"):
        model.complete(PROMPT)
    with pytest.raises(Unavailable):
        model.complete(PROMPT)
    assert fake.count == 1 and waits == []


def test_server_errors_are_retried_with_growing_waits_then_give_up(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: error(503, "overloaded")
    model, waits = client(fake)
    with pytest.raises(Unavailable, match=r"HTTP 503: overloaded, after 3 tries"):
        model.complete(PROMPT)
    assert fake.count == 3 and model.retries == 2
    assert 0.005 <= waits[0] <= 0.01 and 0.01 <= waits[1] <= 0.02


def test_a_server_that_asks_to_wait_too_long_is_not_waited_for(fake: FakeOpenAI) -> None:
    fake.handler = lambda body, n: error(429, "slow down", {"Retry-After": "3600"})
    model, waits = client(fake)
    with pytest.raises(Unavailable, match="asked to wait 3600 s"):
        model.complete(PROMPT)
    assert waits == [] and fake.count == 1


def test_retry_after_in_all_its_forms() -> None:
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_backoff_doubles_is_capped_and_yields_to_the_server() -> None:
    assert backoff_wait(0, 1.0, None, jitter=lambda: 1.0) == 1.0
    assert backoff_wait(3, 1.0, None, jitter=lambda: 1.0) == 8.0
    assert backoff_wait(20, 1.0, None, jitter=lambda: 1.0) == MAX_WAIT_SECONDS
    assert backoff_wait(3, 1.0, 0.2) == 0.2
    assert backoff_wait(0, 1.0, MAX_WAIT_SECONDS + 1) is None


# --------------------------------------------------------------------------- options


def test_the_cache_defaults_to_the_user_cache_home(tmp_path: Path) -> None:
    opts = build_options("m", "k", None, {}, tmp_path / "repo", {"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert opts.cache_dir == tmp_path / "xdg" / "review-copies" / "llm"
    assert build_options("m", "k", None, {}, None, {"HOME": str(tmp_path)}).cache_dir == tmp_path / ".cache" / "review-copies" / "llm"
    assert build_options("m", "k", None, {"llm-cache-dir": ""}, None, {}).cache_dir is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"llm-cache-dir": "cache"}, "must be an absolute path"),
        ({"llm-budget-tokens": 0}, "'llm-budget-tokens' must be greater than 0"),
        ({"llm-retries": -1}, "'llm-retries' must be 0 or more"),
        ({"llm-retries": 1_000_000}, "'llm-retries' must be at most 10"),
        ({"price-per-million-input": -1}, "must not be negative"),
    ],
)
def test_bad_llm_settings_are_usage_errors(table: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_options("m", "k", None, table, None, {})


def test_a_cache_inside_the_reviewed_repository_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    with pytest.raises(UsageError, match="inside the reviewed repository"):
        build_options("m", "k", None, {"llm-cache-dir": str(repo / ".cache")}, repo, {})
    # A default cache home inside the repository means no cache, never files in the repo.
    assert build_options("m", "k", None, {}, repo, {"XDG_CACHE_HOME": str(repo / "x")}).cache_dir is None


# --------------------------------------------------------------------------- planning


def _hunk(path: str, start: int, size: int) -> TensorHunk:
    lines = tuple((n, f"    x{n} = t.clone().add_(1)  # some tensor code") for n in range(start, start + size))
    return TensorHunk(path, "function", "f", start, start + size - 1, (start,), lines, ())


def _render(blocks) -> str:
    return "\n".join(text for b in blocks for h in b.hunks for _, text in h.lines)


def test_hunks_are_packed_into_requests_under_the_request_limit() -> None:
    hunks = [_hunk("a.py", 1, 10), _hunk("a.py", 20, 10), _hunk("b.py", 1, 10)]
    one = estimate_tokens(_render([FileBlock("a.py", (hunks[0],))]))
    plan = plan_requests(hunks, [], _render, 100, 100 + 2 * one + 5, 10**6)
    assert [[(h.path, h.start) for h in r.hunks] for r in plan.requests] == [[("a.py", 1), ("a.py", 20)], [("b.py", 1)]]
    assert plan.left_out == []


def test_what_does_not_fit_is_left_out_with_the_reason() -> None:
    big, small = _hunk("a.py", 1, 200), _hunk("b.py", 1, 5)
    small_cost = 100 + estimate_tokens(_render([FileBlock("b.py", (small,))]))
    plan = plan_requests([big, small], [], _render, 100, small_cost + 10, 10**6)
    assert [(h.path, reason.split(" (")[0]) for h, reason in plan.left_out] == [("a.py", "larger than one request may be")]
    assert [h.path for r in plan.requests for h in r.hunks] == ["b.py"]

    budget = plan_requests([small, _hunk("c.py", 1, 5)], [], _render, 100, 10**6, small_cost + 10)
    assert [h.path for h, _ in budget.left_out] == ["c.py"]
    assert "llm-budget-tokens" in budget.left_out[0][1]


def test_a_hunk_too_large_with_the_full_guidance_is_planned_with_lighter_guidance() -> None:
    hunk = _hunk("a.py", 1, 10)
    code = estimate_tokens(_render([FileBlock("a.py", (hunk,))]))

    def full(blocks) -> str:
        return "guidance " * 400 + _render(blocks)

    def lighter(blocks) -> str:
        return "guidance " * 50 + _render(blocks)

    limit = 100 + code + estimate_tokens("guidance " * 50) + 5
    plan = plan_requests([hunk], [], full, 100, limit, 10**6, lighter=[("no-examples", lighter), ("none", _render)])
    assert [(r.guidance, [h.path for h in r.hunks]) for r in plan.requests] == [("no-examples", ["a.py"])]
    assert plan.left_out == []
    # Too large even with no guidance at all: left out, with the request limit as the reason.
    tight = plan_requests([hunk], [], full, 100, 100 + code - 1, 10**6, lighter=[("none", _render)])
    assert tight.requests == [] and "llm-request-tokens" in tight.left_out[0][1]
