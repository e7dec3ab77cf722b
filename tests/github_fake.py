"""A fake GitHub API for the tests, served over real HTTP by pytest-httpserver.

It keeps reviews, review comments and their threads, and enforces the rules of the real
API that the bot must respect: the token, write permission, the 65,536-character body
limit, comments only on lines of the pull request's diff (computed here, independently,
from the hunk headers of `git diff base...head`), `start_line` in the same hunk as
`line`, one PENDING review per user. Failures can be injected per route.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

BOT = "github-actions[bot]"
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


@dataclass
class Failure:
    method: str
    path: str  # a substring of the request path
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    times: int = 1
    # Handle the request first, then answer with the failure (a POST that landed but
    # whose answer was lost).
    after: bool = False


def diff_ranges(repo: str, base: str, head: str) -> dict[str, list[tuple[int, int]]]:
    """New-side line ranges of every hunk, as GitHub shows the pull request's diff."""
    out = subprocess.run(["git", "-C", repo, "diff", "-U3", "--no-color", f"{base}...{head}"], check=True, capture_output=True, text=True).stdout
    ranges: dict[str, list[tuple[int, int]]] = {}
    for section in re.split(r"^diff --git ", out, flags=re.MULTILINE)[1:]:
        match = re.search(r"^\+\+\+ b/(.+)$", section, re.MULTILINE)
        if match is None:
            continue
        for hunk in HUNK.finditer(section):
            start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
            if count:
                ranges.setdefault(match.group(1), []).append((start, start + count - 1))
    return ranges


class FakeGitHub:
    def __init__(self, server: HTTPServer, repository: str = "octo/torchproj", number: int = 7, token: str = "ghs_writer", prefix: str = "") -> None:
        self.server = server
        self.repository = repository
        self.number = number
        self.token = token
        self.prefix = prefix
        self.graphql_path = "/api/graphql" if prefix == "/api/v3" else "/graphql"
        self.page_size = 2
        self.writable = True
        self.resolvable = True  # False: resolveReviewThread fails, as for some app tokens
        self.reviews: list[dict[str, Any]] = []
        self.comments: list[dict[str, Any]] = []
        self.threads: dict[int, dict[str, Any]] = {}  # root comment id -> thread
        self.requests: list[tuple[str, str, Any]] = []
        self.failures: list[Failure] = []
        self.allowed: dict[str, list[tuple[int, int]]] = {}
        self.refuse: set[tuple[str, int]] = set()  # lines GitHub refuses anyway
        self.pull: dict[str, Any] = {}
        self.files: list[dict[str, Any]] = []
        self.contents: dict[tuple[str, str], bytes] = {}
        # `GET /user`: None answers 403 as for GITHUB_TOKEN (which posts as BOT); a login
        # answers as for a person's token, which posts as that person.
        self.user: str | None = None
        self._ids = 100
        server.expect_request(re.compile(".*")).respond_with_handler(self.handle)

    # ----------------------------------------------------------------- for tests

    @property
    def api_url(self) -> str:
        return self.server.url_for(self.prefix).rstrip("/")

    def set_diff(self, repo: str, base: str, head: str) -> None:
        self.allowed = diff_ranges(repo, base, head)

    def fail(self, method: str, path: str, status: int, headers: dict[str, str] | None = None, body: Any = None, times: int = 1, after: bool = False) -> None:
        self.failures.append(Failure(method, path, status, headers or {}, body, times, after))

    def posted_reviews(self) -> list[dict[str, Any]]:
        return [r for r in self.reviews if r["state"] != "PENDING"]

    def calls(self, method: str, path_part: str) -> list[Any]:
        return [body for m, p, body in self.requests if m == method and path_part in p]

    def outdate(self, path: str, line: int) -> None:
        """What GitHub does when a push changes the commented lines."""
        for c in self.comments:
            if c["path"] == path and c["line"] == line and c["id"] in self.threads:
                self.threads[c["id"]]["isOutdated"] = True
                c["line"] = None

    def reply(self, root_id: int, login: str, body: str) -> None:
        root = next(c for c in self.comments if c["id"] == root_id)
        reply = {**root, "id": self._next(), "body": body, "user": {"login": login, "type": "User"}, "in_reply_to_id": root_id}
        self.comments.append(reply)

    # ----------------------------------------------------------------- serving

    def _next(self) -> int:
        self._ids += 1
        return self._ids

    def handle(self, request: Request) -> Response:
        path = request.path
        body = request.get_json(silent=True) if request.data else None
        self.requests.append((request.method, path, body))
        failure = next((f for f in self.failures if f.times > 0 and f.method == request.method and f.path in path), None)
        if failure is not None and not failure.after:
            failure.times -= 1
            return self._json(failure.body or {"message": "injected failure"}, failure.status, failure.headers)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._json({"message": "Bad credentials"}, 401)
        response = self._route(request, path, body)
        if failure is not None:
            failure.times -= 1
            return self._json(failure.body or {"message": "injected failure"}, failure.status, failure.headers)
        return response

    def _route(self, request: Request, path: str, body: Any) -> Response:
        if path == self.graphql_path and request.method == "POST":
            return self._graphql(body or {})
        rest = path[len(self.prefix) :] if path.startswith(self.prefix) else path
        if rest == "/user" and request.method == "GET":
            return self._json({"login": self.user}) if self.user else self._json({"message": "Resource not accessible by integration"}, 403)
        pull = f"/repos/{self.repository}/pulls/{self.number}"
        if rest == pull and request.method == "GET":
            return self._json(self.pull)
        if rest == f"{pull}/comments" and request.method == "GET":
            return self._page(request, self.comments)
        if rest == f"{pull}/files" and request.method == "GET":
            return self._page(request, self.files)
        if rest == f"{pull}/reviews" and request.method == "GET":
            return self._page(request, self.reviews)
        if rest == f"{pull}/reviews" and request.method == "POST":
            return self._create_review(body or {})
        match = re.fullmatch(rf"{re.escape(pull)}/reviews/(\d+)", rest)
        if match and request.method == "DELETE":
            return self._delete_review(int(match.group(1)))
        match = re.fullmatch(rf"/repos/{re.escape(self.repository)}/contents/(.+)", rest)
        if match and request.method == "GET":
            data = self.contents.get((request.args.get("ref", ""), match.group(1)))
            return Response(data, 200, content_type="application/vnd.github.raw") if data is not None else self._json({"message": "Not Found"}, 404)
        return self._json({"message": "Not Found"}, 404)

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json.dumps(data), status, headers=headers or {}, content_type="application/json; charset=utf-8")

    def _page(self, request: Request, items: list[dict[str, Any]]) -> Response:
        page = int(request.args.get("page", "1"))
        per_page = min(int(request.args.get("per_page", "30")), self.page_size)
        visible = [i for i in items if not i.get("_pending")]
        chunk = visible[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(visible):
            query = parse_qs(urlsplit(request.url).query)
            query["page"] = [str(page + 1)]
            query["per_page"] = [str(per_page)]
            qs = "&".join(f"{k}={v[0]}" for k, v in query.items())
            headers["Link"] = f'<{request.base_url}?{qs}>; rel="next"'
        return self._json(chunk, 200, headers)

    # ----------------------------------------------------------------- reviews

    def _unprocessable(self, message: str) -> Response:
        return self._json({"message": "Unprocessable Entity", "errors": [message], "documentation_url": "https://docs.github.com/rest"}, 422)

    def _comment_problem(self, c: dict[str, Any]) -> str | None:
        path, line, start = c.get("path"), c.get("line"), c.get("start_line", c.get("line"))
        if not isinstance(path, str) or not isinstance(line, int) or not isinstance(start, int):
            return "Invalid request: path and line are required"
        if c.get("side") != "RIGHT" or ("start_line" in c and c.get("start_side") != "RIGHT"):
            return "side must be RIGHT for these lines"
        if "start_line" in c and start >= line:
            return "start_line must precede line"
        if len(c.get("body") or "") > 65536:
            return "Body is too long (maximum is 65536 characters)"
        hunk = next(((a, b) for a, b in self.allowed.get(path, []) if a <= line <= b), None)
        if hunk is None or any((path, n) in self.refuse for n in range(start, line + 1)):
            return "Pull request review thread line must be part of the diff"
        if not hunk[0] <= start <= hunk[1]:
            return "Pull request review thread start line must be part of the same hunk as the line"
        return None

    def _create_review(self, body: dict[str, Any]) -> Response:
        if not self.writable:
            return self._json({"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest"}, 403)
        if len(body.get("body") or "") > 65536:
            return self._unprocessable("Body is too long (maximum is 65536 characters)")
        comments = body.get("comments") or []
        for c in comments:
            problem = self._comment_problem(c)
            if problem:
                return self._unprocessable(problem)
        pending = "event" not in body
        if pending and any(r["state"] == "PENDING" for r in self.reviews):
            return self._unprocessable("User can only have one pending review per pull request")
        if body.get("event") not in (None, "COMMENT"):
            return self._unprocessable("the bot only comments")
        review_id = self._next()
        review = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": {"login": self.user or BOT, "type": "User" if self.user else "Bot"},
            "body": body.get("body") or "",
            "state": "PENDING" if pending else "COMMENTED",
            "commit_id": body.get("commit_id"),
            "html_url": f"https://github.com/{self.repository}/pull/{self.number}#pullrequestreview-{review_id}",
        }
        self.reviews.append(review)
        for c in comments:
            cid = self._next()
            stored = {
                "id": cid,
                "node_id": f"PRRC_{cid}",
                "pull_request_review_id": review_id,
                "path": c["path"],
                "line": c["line"],
                "start_line": c.get("start_line"),
                "side": "RIGHT",
                "body": c["body"],
                "commit_id": body.get("commit_id"),
                "user": {"login": self.user or BOT, "type": "User" if self.user else "Bot"},
                "in_reply_to_id": None,
                "_pending": pending,
            }
            self.comments.append(stored)
            if not pending:
                self.threads[cid] = {"id": f"PRRT_{cid}", "isResolved": False, "isOutdated": False, "isMinimized": False}
        return self._json(review)

    def _delete_review(self, review_id: int) -> Response:
        review = next((r for r in self.reviews if r["id"] == review_id), None)
        if review is None:
            return self._json({"message": "Not Found"}, 404)
        if review["state"] != "PENDING":
            return self._unprocessable("Can not delete a non-pending pull request review")
        self.reviews.remove(review)
        self.comments = [c for c in self.comments if c["pull_request_review_id"] != review_id]
        return self._json(review)

    # ----------------------------------------------------------------- graphql

    def _graphql(self, payload: dict[str, Any]) -> Response:
        query, variables = payload.get("query", ""), payload.get("variables") or {}
        if not self.writable and "mutation" in query:
            return self._json({"data": None, "errors": [{"type": "FORBIDDEN", "message": "Resource not accessible by integration"}]})
        if "resolveReviewThread" in query and not self.resolvable:
            return self._json({"data": None, "errors": [{"type": "FORBIDDEN", "message": "Resource not accessible by integration"}]})
        if "resolveReviewThread" in query:
            thread = next(t for t in self.threads.values() if t["id"] == variables["id"])
            thread["isResolved"] = True
            return self._json({"data": {"resolveReviewThread": {"thread": {"id": thread["id"], "isResolved": True}}}})
        if "minimizeComment" in query:
            cid = int(variables["id"].split("_")[1])
            self.threads[cid]["isMinimized"] = True
            return self._json({"data": {"minimizeComment": {"minimizedComment": {"isMinimized": True}}}})
        if "reviewThreads" in query:
            return self._json({"data": self._threads_page(variables)})
        return self._json({"errors": [{"message": "unknown query"}]})

    def _threads_page(self, variables: dict[str, Any]) -> dict[str, Any]:
        start = int(variables.get("cursor") or 0)
        roots = [cid for cid in self.threads]
        chunk = roots[start : start + self.page_size]
        nodes = []
        for cid in chunk:
            t = self.threads[cid]
            in_thread = [c for c in self.comments if c["id"] == cid or c.get("in_reply_to_id") == cid]
            nodes.append(
                {
                    "id": t["id"],
                    "isResolved": t["isResolved"],
                    "isOutdated": t["isOutdated"],
                    "comments": {
                        "nodes": [
                            {
                                "databaseId": c["id"],
                                "isMinimized": t["isMinimized"] and c["id"] == cid,
                                # GraphQL names a bot without the "[bot]" that REST adds.
                                "author": {"login": c["user"]["login"].removesuffix("[bot]")},
                            }
                            for c in in_thread
                        ]
                    },
                }
            )
        more = start + self.page_size < len(roots)
        page = {"pageInfo": {"hasNextPage": more, "endCursor": str(start + self.page_size) if more else None}, "nodes": nodes}
        return {"repository": {"pullRequest": {"reviewThreads": page}}}
