"""The pieces behind --post-review: where comments may go, what they say, how the client
waits. Each test states what a reviewer on GitHub would see go wrong without it."""

from __future__ import annotations

import email.utils
import json

import pytest
from werkzeug import Response

from review_copies.github import markers
from review_copies.github.api import ApiError, GitHubClient, RetryPolicy, graphql_url_for, next_link, retry_after
from review_copies.github.bodies import BODY_LIMIT, ReviewSummary, comment_body, review_body, suggestion_fence
from review_copies.github.diff_positions import DiffMap, positions, suggestion_applies
from review_copies.github.pr_files import diff_map_from_files
from review_copies.github.reviews_api import comment_payload
from review_copies.model.findings import Category, Finding, Severity, Status, Suggestion, Verification

FILE = ["import torch\n"] + [f"line{i} = torch.tensor(t{i})\n" for i in range(2, 41)]


def _finding(line: int, end: int | None = None, suggestion: Suggestion | None = None, message: str = "torch.tensor(t) copies and detaches", **kw) -> Finding:
    return Finding(
        path="m.py",
        line=line,
        end_line=end or line,
        category=Category.COPY_CONSTRUCT,
        rule="RC301",
        severity=Severity.WARNING,
        message=message,
        suggestion=suggestion,
        code=FILE[line - 1],
        **kw,
    )


def _fix(start: int, end: int, text: str = "fixed = t.detach().clone()\n") -> Suggestion:
    return Suggestion(start, end, text, "".join(FILE[start - 1 : end]))


DIFF = DiffMap({"m.py": ((3, 9), (20, 26))})


def _lines(path: str):
    return FILE if path == "m.py" else None


# ------------------------------------------------------------------ anchors


def test_a_comment_range_never_leaves_its_hunk() -> None:
    placed = positions([_finding(8, 12)], DIFF, _lines)

    assert [(s.start_line, s.line) for s in placed.inline] == [(8, 9)], "clamped to the hunk 3-9, else GitHub answers 422"


def test_a_finding_outside_every_hunk_goes_to_the_body() -> None:
    placed = positions([_finding(15)], DIFF, _lines)

    assert placed.inline == [] and placed.body[0][1] == "outside the lines this pull request changes"


def test_a_suggestion_across_two_hunks_is_not_committable() -> None:
    placed = positions([_finding(9, suggestion=_fix(9, 20))], DIFF, _lines)

    spot = placed.inline[0]
    assert not spot.committable and (spot.start_line, spot.line) == (None, 9)
    assert "```suggestion" not in comment_body(spot) and "```diff" in comment_body(spot)


def test_a_suggestion_for_other_lines_than_the_file_has_is_not_committable() -> None:
    stale = Suggestion(5, 5, "x = 1\n", "this is not line 5\n")

    assert not suggestion_applies("m.py", stale, _lines)
    assert not positions([_finding(5, suggestion=stale)], DIFF, _lines).inline[0].committable


def test_a_suggestion_that_changes_nothing_is_not_offered() -> None:
    assert not suggestion_applies("m.py", Suggestion(5, 5, FILE[4], FILE[4]), _lines)


def test_two_suggestions_on_one_line_only_the_first_is_committable() -> None:
    placed = positions([_finding(5, suggestion=_fix(5, 6)), _finding(6, suggestion=_fix(6, 6))], DIFF, _lines)

    assert [s.committable for s in placed.inline] == [True, False]


def test_a_committable_comment_covers_exactly_the_suggestion() -> None:
    spot = positions([_finding(21, suggestion=_fix(21, 23))], DIFF, _lines).inline[0]

    payload = comment_payload(spot)
    assert (payload["start_line"], payload["line"], payload["side"], payload["start_side"]) == (21, 23, "RIGHT", "RIGHT")


def test_api_patches_give_the_same_hunks_as_git() -> None:
    files = [
        {"filename": "m.py", "status": "modified", "patch": "@@ -1,3 +1,4 @@\n import torch\n+a = 1\n b = 2\n c = 3\n@@ -20,2 +21,3 @@ def f():\n x\n+y\n z"},
        {"filename": "big.py", "status": "modified"},
        {"filename": "gone.py", "status": "removed", "patch": "@@ -1 +0,0 @@\n-x"},
    ]

    diff = diff_map_from_files(files)

    assert diff.hunks == {"m.py": ((1, 4), (21, 23))}


# ------------------------------------------------------------------- bodies


def test_suggestion_fences_outgrow_backticks_and_can_delete() -> None:
    assert suggestion_fence('doc = """```py\nx\n```"""\n').startswith("````suggestion\n")
    assert suggestion_fence("") == "```suggestion\n```"


def test_a_huge_message_still_fits_in_a_comment() -> None:
    f = _finding(5, message="x" * 200_000, verification=Verification(Status.CONFIRMED, "cpu", "y" * 200_000))
    spot = positions([f], DIFF, _lines).inline[0]

    body = comment_body(spot)

    assert len(body) < 65_536 and body.endswith(markers.finding_marker(f))


def test_long_evidence_folds_into_details() -> None:
    f = _finding(5, verification=Verification(Status.CONFIRMED, "cuda", "step 1: max abs diff 0.5\nstep 2: max abs diff 0.7"))

    body = comment_body(positions([f], DIFF, _lines).inline[0])

    assert "<details><summary><b>✅ sandbox confirmed on cuda</b></summary>" in body and "step 2: max abs diff 0.7" in body


def test_a_review_body_listing_thousands_stays_under_the_limit() -> None:
    from review_copies.model.report import Report

    listed = [(_finding(20 + i % 7, message=f"finding {i} " + "z" * 300), "outside the lines this pull request changes") for i in range(3000)]
    summary = ReviewSummary("a" * 40, "1.1", [f for f, _ in listed], [], listed, Report())

    body = review_body(summary)

    assert len(body) <= BODY_LIMIT and "more, listed in the job summary" in body
    assert markers.review_run(body) == ("a" * 40, "1.1")


def test_the_body_counts_categories_verdicts_dropped_and_skipped() -> None:
    from review_copies.model.findings import Dropped
    from review_copies.model.report import Report, Stats

    confirmed = _finding(5, verification=Verification(Status.CONFIRMED, "cpu", "diff 0.5"))
    stats = Stats(files=4, skipped={"not-python": 2, "binary": 1})
    dropped = [Dropped(_finding(6), "sandbox refuted it: outputs equal"), Dropped(_finding(7), "line outside the hunks")]
    report = Report(findings=[confirmed], dropped=dropped, stats=stats)
    spot = positions([confirmed], DIFF, _lines).inline[0]

    body = review_body(ReviewSummary("a" * 40, "1.1", [confirmed], [spot], [], report, already_posted=3))

    assert "| copy-construct | 1 |" in body and "✅ 1 confirmed" in body
    assert "Dropped: 2 findings not posted (1 refuted by the sandbox, 1 failed validation" in body
    assert "Skipped: 3 files (binary: 1, not-python: 2)" in body and "Not repeated: 3 findings already posted" in body


def test_text_cannot_forge_markers_or_mention_people() -> None:
    text = markers.defuse("ping @octo/team and <!-- review-copies:fp=0123456789abcdef rule=X --> `@ok` a@b.c")

    assert markers.comment_fingerprint(text) is None
    assert "@\u200bocto/team" in text and "`@ok`" in text and "a@b.c" in text


# ------------------------------------------------------------------ the client


def test_retry_after_forms() -> None:
    now = 1_800_000_000.0
    assert retry_after({"retry-after": "7"}, now) == 7
    assert retry_after({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now) == pytest.approx(30, abs=1)
    assert retry_after({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(now) + 120)}, now) == 121
    assert retry_after({"x-ratelimit-remaining": "12"}, now) is None


def test_graphql_endpoints() -> None:
    assert graphql_url_for("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url_for("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/graphql"


def test_which_errors_are_which() -> None:
    fork = ApiError("POST", "u", 403, "Resource not accessible by integration")
    secondary = ApiError("POST", "u", 403, "You have exceeded a secondary rate limit")
    assert fork.permission_denied and not fork.transient
    assert secondary.rate_limited and secondary.transient and not secondary.permission_denied
    assert ApiError("GET", "u", 502, "").transient and ApiError("GET", "u", None, "").transient
    assert next_link('<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=9>; rel="last"') == "https://api.github.com/x?page=2"


def _client(httpserver, waits: list[float], **policy) -> GitHubClient:
    return GitHubClient(httpserver.url_for("").rstrip("/"), "tok", policy=RetryPolicy(**policy), sleep=waits.append)


def test_the_client_waits_as_long_as_github_asks(httpserver) -> None:
    answers = iter([Response("{}", 503, {"Retry-After": "3"}), Response("{}", 502), Response('{"ok": true}', 200, content_type="application/json")])
    httpserver.expect_request("/thing").respond_with_handler(lambda request: next(answers))
    waits: list[float] = []

    assert _client(httpserver, waits, backoff=0.25).request("GET", "thing").data == {"ok": True}
    assert waits == [3.0, 0.5], "Retry-After first, then the configured backoff, doubled"


def test_a_wait_longer_than_the_cap_is_not_waited(httpserver) -> None:
    httpserver.expect_request("/thing").respond_with_json({"message": "API rate limit exceeded"}, status=429, headers={"Retry-After": "900"})
    waits: list[float] = []

    with pytest.raises(ApiError) as caught:
        _client(httpserver, waits, max_wait=60).request("GET", "thing")
    assert waits == [] and caught.value.status == 429


def test_pagination_never_sends_the_token_to_another_host(httpserver) -> None:
    seen: list[str | None] = []

    def first(request):
        seen.append(request.headers.get("Authorization"))
        return Response(json.dumps([1]), 200, {"Link": '<https://elsewhere.example/items?page=2>; rel="next"'}, content_type="application/json")

    httpserver.expect_request("/items").respond_with_handler(first)

    with pytest.raises(ApiError, match="outside the API"):
        list(_client(httpserver, []).paginate("items"))
    assert seen == ["Bearer tok"]
