"""The LLM reviewer end to end: `review-copies` on a real git repository, the real `openai`
client, and a fake OpenAI-compatible server over real HTTP replaying recorded answers."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import git
import pytest

from review_copies.llm.options import build_options
from review_copies.llm.prompts import load_book, render_user
from review_copies.llm.stage import LLMStage
from review_copies.llm.tokens import estimate_tokens
from review_copies.model.findings import Category
from review_copies.model.settings import ChangeSpec
from review_copies.review.static import StaticOptions, run_static
from review_copies.rules import all_rules
from review_copies.source.changes import build_changeset
from tests.llm_fake import DATA, FakeOpenAI, by_file, completion, error, llm_config, make_repo, recorded, review, slow, start_fake

FILES = ("pkg/train.py", "pkg/metrics.py")


def _texts(side: str) -> dict[str, str]:
    return {path: (DATA / side / path).read_text(encoding="utf-8") for path in FILES}


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


@pytest.fixture(autouse=True)
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A key for the fake server, and a cache home outside every repository under test."""
    cache_home = tmp_path / "cache-home"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return cache_home


def one_file_per_request(repo: Path) -> int:
    """A request limit that holds the largest single file of the change but never two."""
    static = run_static(build_changeset(ChangeSpec(repo=str(repo), base="HEAD~1", head="HEAD")), StaticOptions(rules=all_rules(), want_hunks=True))
    opts = build_options("fake-model", "sk-test", None, {}, None, {})
    stage = LLMStage(opts, all_rules(), list(Category), io.StringIO())
    sizes = []
    for path in FILES:
        hunks = [h for h in static.hunks if h.path == path]
        sizes.append(stage.prepare(load_book(), hunks, static.findings).plan.requests[0].tokens)
    return max(sizes) + 20


def _repo(tmp_path: Path, **config: object) -> Path:
    """The change of tests/llm_data, configured to send each file in its own request."""
    probe = make_repo(tmp_path / "probe", _texts("base"), _texts("head"))
    keys = {"llm-request-tokens": one_file_per_request(probe), **config}
    return make_repo(tmp_path / "repo", _texts("base"), _texts("head"), llm_config(**keys))


def run(repo: Path, fake: FakeOpenAI, *args: str):
    return review(repo, "--format", "json", "--base-url", fake.url, "--model", "fake-model", *args)


def _summary(findings: list[dict]) -> list[tuple[str, int, str, str]]:
    return [(f["path"], f["line"], f["rule"], f["source"]) for f in findings]


def test_real_finding_is_posted_and_every_decoy_is_dropped_with_its_reason(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path)
    fake.handler = by_file({"pkg/train.py": recorded("train_with_decoys.json"), "pkg/metrics.py": recorded("metrics_malformed.txt")})
    result = run(repo, fake)
    report = result.json

    assert fake.count == 2
    assert _summary(report["findings"]) == [("pkg/metrics.py", 6, "RC301", "static"), ("pkg/train.py", 16, "RC252", "static"), ("pkg/train.py", 19, "llm-stale-snapshot", "llm")]
    real = report["findings"][2]
    # Anchored by its quote (the model said line 20), the fix moved with it.
    assert real["suggestion"] == {"start_line": 19, "end_line": 19, "replacement": "                best = copy.deepcopy(weights(model))\n"}
    assert real["category"] == "stale-snapshot" and real["severity"] == "warning"
    reasons = sorted(d["reason"] for d in report["dropped"])
    assert len(reasons) == 3
    assert any("line 1 is outside the hunks shown" in r for r in reasons)
    assert any("unknown category 'tensor-leak'" in r for r in reasons)
    # The graph-retention finding whose fix does not parse stands without its fix (and
    # joins the static RC252 on the same line).
    assert report["stats"]["llm_fixes_dropped"] == 1 and report["stats"]["llm_merged_with_static"] >= 1
    assert any("not valid JSON" in r and "pkg/metrics.py" not in r for r in reasons)
    malformed = next(d for d in report["dropped"] if "not valid JSON" in d["reason"])
    assert malformed["path"] == "pkg/metrics.py" and malformed["category"] is None
    assert any("not reviewed by the LLM" in line and "pkg/metrics.py" in line for line in report["coverage"])

    # The decoys change nothing else: same exit status and static findings as a clean answer.
    fake.handler = by_file({"pkg/train.py": recorded("train_real_only.json"), "pkg/metrics.py": recorded("nothing.json")})
    clean = run(repo, fake)
    assert result.status == clean.status == 1
    assert _summary(clean.json["findings"]) == _summary(report["findings"])
    offline = run(repo, fake, "--offline")
    assert [f for f in report["findings"] if f["source"] == "static"] == offline.json["findings"]


def test_second_run_on_the_same_head_is_answered_from_the_cache(tmp_path: Path, fake: FakeOpenAI, environment: Path) -> None:
    repo = _repo(tmp_path)
    fake.handler = by_file({"pkg/train.py": recorded("train_real_only.json"), "pkg/metrics.py": recorded("nothing.json")})
    first = run(repo, fake)
    assert fake.count == 2
    assert first.json["stats"]["llm_calls"] == 2 and first.json["stats"]["prompt_tokens"] == 1800

    second = run(repo, fake)
    assert fake.count == 2, "the second run sent requests"
    stats = second.json["stats"]
    assert stats["llm_calls"] == 0 and stats["llm_cache_hits"] == 2 and stats["prompt_tokens"] == 0
    assert second.json["findings"] == first.json["findings"]
    # The cache lives under the cache home, and nothing was written into the repository.
    assert list((environment / "review-copies" / "llm").rglob("*.json"))
    assert not git.Repo(repo).is_dirty(untracked_files=True)


def test_a_whole_repository_review_offline_counts_the_tensor_hunks_the_llm_would_get(tmp_path: Path, fake: FakeOpenAI) -> None:
    """`--all` without an LLM still says how much tensor code the rules alone reviewed: the
    same count a run with the LLM reports, not a zero."""
    repo = _repo(tmp_path)
    offline = run(repo, fake, "--all", "--offline")
    fake.handler = by_file({})
    online = run(repo, fake, "--all")

    counted = offline.json["stats"]["tensor_hunks"]
    assert counted > 0 and counted == online.json["stats"]["tensor_hunks"]
    assert offline.json["coverage"] == [f"LLM review: off (--offline); the static rules alone reviewed {counted} tensor hunks"]
    assert online.json["coverage"][0].startswith(f"LLM review (fake-model): {counted} of {counted} tensor hunks reviewed")


def test_offline_and_missing_key_never_open_a_connection(tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path)
    fake.handler = by_file({})
    offline = run(repo, fake, "--offline")
    monkeypatch.delenv("OPENAI_API_KEY")
    keyless = run(repo, fake)

    assert fake.count == 0
    assert offline.json["coverage"] == ["LLM review: off (--offline); the static rules alone reviewed 3 tensor hunks"]
    assert keyless.json["coverage"] == ["LLM review: off (no OPENAI_API_KEY); the static rules alone reviewed 3 tensor hunks"]
    assert keyless.stderr.count("OPENAI_API_KEY is not set") == 1
    assert offline.json["stats"]["llm_calls"] == 0


def test_rate_limit_then_success_honours_retry_after(tmp_path: Path, fake: FakeOpenAI) -> None:
    # A backoff of 30 s would blow the test's time: only the server's 50 ms may be waited.
    repo = _repo(tmp_path, **{"llm-backoff": 30, "llm-concurrency": 1})
    answers = by_file({"pkg/train.py": recorded("train_real_only.json"), "pkg/metrics.py": recorded("nothing.json")})

    def handle(body, n):
        return error(429, "Rate limit reached", {"retry-after-ms": "50"}) if n == 1 else answers(body, n)

    fake.handler = handle
    result = run(repo, fake)
    assert fake.count == 3
    assert result.json["stats"]["llm_retries"] == 1
    assert "llm-stale-snapshot" in [f["rule"] for f in result.json["findings"]]
    assert result.stderr == ""


def test_server_error_every_time_goes_on_with_the_static_findings_and_says_so_once(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path, **{"llm-concurrency": 1})
    fake.handler = lambda body, n: error(500, "The server had an error")
    result = run(repo, fake)

    # Three tries (llm-retries = 2) for the first request; the second is never sent.
    assert fake.count == 3
    assert _summary(result.json["findings"]) == [("pkg/metrics.py", 6, "RC301", "static"), ("pkg/train.py", 16, "RC252", "static")]
    assert result.status == 1
    assert result.stderr.count("is unavailable") == 1 and "HTTP 500" in result.stderr
    coverage = result.json["coverage"]
    assert coverage[0].startswith("LLM review (fake-model): 0 of 3 tensor hunks reviewed")
    assert "the model was unavailable: HTTP 500" in coverage[1] and "after 3 tries" in coverage[1]


def test_slow_server_past_the_timeout_counts_as_unavailable(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path, **{"llm-timeout": 0.3, "llm-retries": 0, "llm-concurrency": 1})
    fake.handler = slow(1.2, by_file({}))
    result = run(repo, fake)
    assert fake.count == 1
    assert "no answer within 0.3 s" in result.stderr
    assert _summary(result.json["findings"]) == [("pkg/metrics.py", 6, "RC301", "static"), ("pkg/train.py", 16, "RC252", "static")]


def test_server_that_refuses_json_schema_gets_json_object_and_the_schema_in_the_prompt(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path, **{"llm-concurrency": 1})
    answers = by_file({"pkg/train.py": recorded("train_real_only.json"), "pkg/metrics.py": recorded("nothing.json")})

    def handle(body, n):
        kind = body.get("response_format", {}).get("type")
        if kind == "json_schema":
            return error(400, "response_format of type 'json_schema' is not supported by this server")
        assert kind == "json_object" and '"stale-snapshot"' in FakeOpenAI.system_message(body)
        return answers(body, n)

    fake.handler = handle
    result = run(repo, fake)
    # One refusal, then both requests in json_object mode: the lesson is kept.
    assert [b.get("response_format", {}).get("type") for b in fake.bodies] == ["json_schema", "json_object", "json_object"]
    assert result.json["stats"]["llm_response_format"] == "json_object"
    assert "llm-stale-snapshot" in [f["rule"] for f in result.json["findings"]]


def test_requests_are_chat_completions_at_temperature_zero_with_the_schema(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path)
    fake.handler = by_file({})
    run(repo, fake)
    body = fake.bodies[0]
    assert body["model"] == "fake-model" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_the_text_report_prints_tokens_cost_and_coverage(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path, **{"price-per-million-input": 0.15, "price-per-million-output": 0.6})
    fake.handler = lambda body, n: completion(recorded("nothing.json"), prompt_tokens=1000, completion_tokens=100)
    result = review(repo, "--base-url", fake.url, "--model", "fake-model")
    assert "LLM: 2 calls, 2000 prompt + 200 completion tokens" in result.stdout
    assert "about $0.0004" in result.stdout
    assert "Coverage: LLM review (fake-model): 3 of 3 tensor hunks reviewed in 2 requests" in result.stdout


def test_hunks_over_the_budget_are_listed_as_not_reviewed(tmp_path: Path, fake: FakeOpenAI) -> None:
    probe = make_repo(tmp_path / "probe", _texts("base"), _texts("head"))
    limit = one_file_per_request(probe)
    # Room for one request of the two.
    repo = make_repo(tmp_path / "repo", _texts("base"), _texts("head"), llm_config(**{"llm-request-tokens": limit, "llm-budget-tokens": limit}))
    fake.handler = by_file({"pkg/train.py": recorded("train_real_only.json")})
    result = run(repo, fake)
    assert fake.count == 1
    coverage = result.json["coverage"]
    assert re.match(r"LLM review \(fake-model\): [12] of 3 tensor hunks reviewed in 1 request", coverage[0]), coverage
    assert "over the review's token budget (llm-budget-tokens" in coverage[1] and "pkg/train.py lines 6-20" in coverage[1]


def test_a_file_too_large_for_a_small_context_is_reviewed_with_shortened_guidance(tmp_path: Path, fake: FakeOpenAI) -> None:
    """A local model's small request limit (README: llm-request-tokens = 6000) fits each file
    only without the rules' few-shot examples: it is sent without them, not left unreviewed."""
    probe = make_repo(tmp_path / "probe", _texts("base"), _texts("head"))
    static = run_static(build_changeset(ChangeSpec(repo=str(probe), base="HEAD~1", head="HEAD")), StaticOptions(rules=all_rules(), want_hunks=True))
    stage = LLMStage(build_options("fake-model", "sk-test", None, {"llm-request-tokens": 10**6}, None, {}), all_rules(), list(Category), io.StringIO())
    book = load_book()
    sizes = {}
    for path in FILES:
        hunks = [h for h in static.hunks if h.path == path]
        full = stage.prepare(book, hunks, static.findings).plan.requests[0]
        system = full.tokens - estimate_tokens(full.user)
        sizes[path] = full.tokens
        sizes[path + " lighter"] = system + estimate_tokens(render_user(book, full.blocks, list(Category), all_rules(), level="no-examples"))
    limit = max(sizes[p + " lighter"] for p in FILES) + 5
    assert limit < min(sizes[p] for p in FILES), sizes
    repo = make_repo(tmp_path / "repo", _texts("base"), _texts("head"), llm_config(**{"llm-request-tokens": limit}))
    fake.handler = by_file({"pkg/train.py": recorded("train_real_only.json"), "pkg/metrics.py": recorded("nothing.json")})
    result = run(repo, fake)
    coverage = result.json["coverage"]
    assert len(coverage) == 1 and coverage[0].startswith("LLM review (fake-model): 3 of 3 tensor hunks reviewed in"), coverage
    shortened = int(re.search(r"(\d+) with shortened guidance to fit llm-request-tokens = (\d+)", coverage[0])[1])
    users = [FakeOpenAI.user_message(b) for b in fake.bodies]
    without_examples = [u for u in users if "flags line" not in u]
    assert shortened >= 1 and len(without_examples) == shortened
    assert all("# How to decide" in u for u in without_examples)
    assert "llm-stale-snapshot" in [f["rule"] for f in result.json["findings"]]


def test_an_answer_cut_off_at_the_output_limit_is_dropped_and_asked_again_next_time(tmp_path: Path, fake: FakeOpenAI) -> None:
    repo = _repo(tmp_path)
    cut = recorded("train_real_only.json")[:150]
    fake.handler = lambda body, n: completion(cut, finish_reason="length")
    first = run(repo, fake)
    reasons = [d["reason"] for d in first.json["dropped"]]
    assert len(reasons) == 2 and all("cut off at llm-max-output-tokens = 2000" in r for r in reasons)
    run(repo, fake)
    assert fake.count == 4, "an unusable answer was served from the cache"


def test_an_unwritable_cache_costs_only_the_cache(tmp_path: Path, fake: FakeOpenAI, environment: Path) -> None:
    repo = _repo(tmp_path)
    environment.mkdir(parents=True)
    (environment / "review-copies").write_text("a file where the cache folder should be")
    fake.handler = by_file({"pkg/train.py": recorded("train_real_only.json")})
    result = run(repo, fake)
    assert "llm-stale-snapshot" in [f["rule"] for f in result.json["findings"]]
    assert any("cannot be written" in n["message"] for n in result.json["notes"])


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "markdown", "github"])
def test_every_report_format_carries_the_coverage_line(tmp_path: Path, fake: FakeOpenAI, fmt: str) -> None:
    repo = _repo(tmp_path)
    result = review(repo, "--format", fmt, "--offline")
    assert "LLM review: off (--offline); the static rules alone reviewed 3 tensor hunks" in result.stdout


def test_the_prefix_the_server_had_cached_is_reported(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Every request starts with the same fixed text, so a hosted API serves it from its
    prefix cache: the report says how many prompt tokens came from there."""
    repo = _repo(tmp_path, **{"llm-cache-dir": ""})
    fake.handler = lambda body, n: completion(recorded("nothing.json"), prompt_tokens=1000, completion_tokens=100, cached_tokens=0 if n % 2 == 0 else 768)
    result = review(repo, "--base-url", fake.url, "--model", "fake-model", "--format", "json")
    stats = json.loads(result.stdout)["stats"]
    assert stats["prompt_tokens"] == 2000 and stats["llm_cached_prompt_tokens"] == 768
    bodies = [b["messages"][0]["content"] for b in fake.bodies]
    assert len(bodies) == 2 and bodies[0] == bodies[1], "the system message (the cacheable prefix) differs between requests"
    text = review(repo, "--base-url", fake.url, "--model", "fake-model").stdout
    assert "2000 prompt (768 from the server's prefix cache) + 200 completion tokens" in text
