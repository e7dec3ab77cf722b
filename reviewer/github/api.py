"""GitHub's REST and GraphQL APIs over plain HTTP (urllib), following GitHub's rules for
retries: honour `Retry-After` and `x-ratelimit-reset`, back off on 5xx, and never retry a
request that creates content unless the caller asks (a review posted twice is worse than
none)."""

from __future__ import annotations

import email.utils
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from review_copies import __version__

API_VERSION = "2022-11-28"
# Who GITHUB_TOKEN posts as.
ACTIONS_BOT = "github-actions[bot]"
# A list endpoint longer than this (30,000 items at 100 a page) is a server that never ends.
MAX_PAGES = 300
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    # First wait after a 5xx or a dropped connection, doubled on every further try.
    backoff: float = 1.0
    # A single wait longer than this (a rate limit resetting in 40 minutes) is not waited
    # out: the run gives up on GitHub and falls back to annotations instead of idling.
    max_wait: float = 60.0
    timeout: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetryPolicy:
        def number(name: str, default: float) -> float:
            try:
                return max(0.0, float(env.get(name, default)))
            except ValueError:
                return default

        return cls(
            backoff=number("REVIEW_COPIES_GITHUB_BACKOFF", cls.backoff),
            max_wait=number("REVIEW_COPIES_GITHUB_MAX_WAIT", cls.max_wait),
            timeout=number("REVIEW_COPIES_GITHUB_TIMEOUT", cls.timeout) or cls.timeout,
        )


class ApiError(Exception):
    """A request that failed for good. `status` is None when GitHub could not be reached."""

    def __init__(self, method: str, url: str, status: int | None, message: str, headers: Mapping[str, str] | None = None, errors: Any = None) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.message = " ".join(message.split())
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.errors = errors
        super().__init__(self.describe())

    def describe(self) -> str:
        where = urllib.parse.urlsplit(self.url).path
        status = f"{self.status}" if self.status is not None else "no response"
        detail = self.message
        if self.errors:
            detail += f" ({_error_text(self.errors)})"
        return f"{self.method} {where}: {status} {detail}".strip()

    @property
    def rate_limited(self) -> bool:
        if self.status == 429:
            return True
        if self.status != 403:
            return False
        text = self.message.lower()
        return "retry-after" in self.headers or self.headers.get("x-ratelimit-remaining") == "0" or "rate limit" in text

    @property
    def permission_denied(self) -> bool:
        """The token may not do this (a fork's read-only token, a missing permission)."""
        return self.status in (401, 404) or (self.status == 403 and not self.rate_limited)

    @property
    def transient(self) -> bool:
        return self.status is None or self.status >= 500 or self.rate_limited

    @property
    def unprocessable(self) -> bool:
        return self.status == 422


def _error_text(errors: Any) -> str:
    if isinstance(errors, list):
        parts = [e if isinstance(e, str) else (e.get("message") or e.get("code") or json.dumps(e)) for e in errors if isinstance(e, (str, dict))]
        return "; ".join(str(p) for p in parts)
    return str(errors)


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    data: Any


@dataclass
class GitHubClient:
    api_url: str
    token: str | None
    graphql_url: str | None = None
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    requests_made: int = 0
    _opener: urllib.request.OpenerDirector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        self._opener = urllib.request.build_opener(_SameOriginRedirects(_origin(self.api_url)))
        if self.graphql_url is None:
            self.graphql_url = graphql_url_for(self.api_url)

    # ------------------------------------------------------------------ requests

    def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None, retry: bool = True, accept: str | None = None
    ) -> Response:
        """One call; idempotent ones (retry=True) are retried on 5xx, 429 and rate limits."""
        url = self._url(path, params)
        attempt = 0
        while True:
            try:
                return self._once(method, url, body, accept)
            except ApiError as error:
                attempt += 1
                wait = self.wait_before_retry(error, attempt) if retry and attempt < self.policy.attempts else None
                if wait is None:
                    raise
                self.sleep(wait)

    def wait_before_retry(self, error: ApiError, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None when trying again is pointless."""
        if not error.transient:
            return None
        wait = retry_after(error.headers, self.clock())
        if wait is None and error.rate_limited:
            # GitHub: with no Retry-After on a secondary limit, wait at least a minute.
            wait = 60.0
        if wait is None:
            wait = self.policy.backoff * 2 ** (attempt - 1)
        return wait if wait <= self.policy.max_wait else None

    def paginate(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a list endpoint, following the `Link: rel="next"` headers; a link
        seen before, or more than MAX_PAGES pages, is a server that would never end."""
        query = {"per_page": 100, **(params or {})}
        response = self.request("GET", path, params=query)
        seen = {self._url(path, query)}
        while True:
            if not isinstance(response.data, list):
                raise ApiError("GET", path, response.status, "expected a list")
            yield from response.data
            nxt = next_link(response.headers.get("link", ""))
            if nxt is None:
                return
            if not nxt.startswith(self.api_url + "/"):
                # The token goes only to the API it was given for.
                raise ApiError("GET", nxt, response.status, "pagination link points outside the API")
            if nxt in seen or len(seen) >= MAX_PAGES:
                raise ApiError("GET", nxt, response.status, f"pagination does not end (a page repeats, or more than {MAX_PAGES} pages)")
            seen.add(nxt)
            response = self.request("GET", nxt)

    def login(self) -> str:
        """Who the token posts as: `GET /user` for a person's token; the Actions token may
        not ask (403), and posts as github-actions[bot]."""
        try:
            data = self.request("GET", "/user", retry=False).data
        except ApiError:
            return ACTIONS_BOT
        login = data.get("login") if isinstance(data, dict) else None
        return login if isinstance(login, str) and login else ACTIONS_BOT

    def graphql(self, query: str, variables: Mapping[str, Any]) -> Any:
        assert self.graphql_url is not None
        response = self.request("POST", self.graphql_url, body={"query": query, "variables": dict(variables)})
        data = response.data if isinstance(response.data, dict) else {}
        if data.get("errors"):
            raise ApiError("POST", self.graphql_url, response.status, "GraphQL error", errors=data["errors"])
        return data.get("data") or {}

    # ------------------------------------------------------------------ plumbing

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        url = path if path.startswith(("http://", "https://")) else f"{self.api_url}/{path.lstrip('/')}"
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        return url

    def _headers(self, accept: str | None, has_body: bool) -> dict[str, str]:
        headers = {
            "Accept": accept or "application/vnd.github+json",
            "User-Agent": f"review-copies/{__version__}",
            "X-GitHub-Api-Version": API_VERSION,
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

    def _once(self, method: str, url: str, body: Any, accept: str | None) -> Response:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers=self._headers(accept, data is not None))
        self.requests_made += 1
        try:
            with self._opener.open(req, timeout=self.policy.timeout) as resp:
                raw = resp.read()
                return Response(resp.status, _lower(resp.headers), _decode(raw, resp.headers.get("Content-Type", "")))
        except urllib.error.HTTPError as exc:
            raw = exc.read() if exc.fp is not None else b""
            payload = _decode(raw, exc.headers.get("Content-Type", "") if exc.headers else "")
            message = payload.get("message", "") if isinstance(payload, dict) else ""
            errors = payload.get("errors") if isinstance(payload, dict) else None
            raise ApiError(method, url, exc.code, message or exc.reason or "", _lower(exc.headers), errors) from None
        except OSError as exc:  # URLError, timeouts and dropped connections are all OSErrors
            reason = getattr(exc, "reason", exc)
            raise ApiError(method, url, None, f"cannot reach GitHub: {reason}") from None


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects within the API (a renamed repository) are followed; one to any other
    host is refused, since urllib would send it the `Authorization` header, the token."""

    def __init__(self, origin: tuple[str, str]) -> None:
        self.origin = origin

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if _origin(urllib.parse.urljoin(req.full_url, newurl)) != self.origin:
            raise urllib.error.HTTPError(req.full_url, code, f"redirect to another host refused ({newurl}): the token stays with the API", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _lower(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    return {k.lower(): v for k, v in headers.items()}


def _decode(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    if "json" not in content_type:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return None


def next_link(link: str) -> str | None:
    match = _NEXT_LINK.search(link or "")
    return match.group(1) if match else None


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """The wait GitHub asks for: `Retry-After` (seconds or a date), else the primary
    limit's reset time when no requests are left."""
    value = headers.get("retry-after")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - now)
    if headers.get("x-ratelimit-remaining") == "0":
        reset = headers.get("x-ratelimit-reset", "")
        if reset.isdigit():
            return max(0.0, float(reset) - now + 1)
    return None


def graphql_url_for(api_url: str) -> str:
    """github.com: https://api.github.com/graphql; GitHub Enterprise Server:
    https://HOST/api/v3 -> https://HOST/api/graphql."""
    api_url = api_url.rstrip("/")
    if api_url.endswith("/api/v3"):
        return api_url[: -len("/v3")] + "/graphql"
    return api_url + "/graphql"
