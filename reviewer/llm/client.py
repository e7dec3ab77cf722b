"""One Chat Completions request, made to work against any OpenAI-compatible server.

The `openai` package does the HTTP; its own retries are off so that the policy here is
the only one: retry 408/409/429/5xx, timeouts and dropped connections with exponential
backoff, honouring `Retry-After` (and OpenAI's `retry-after-ms`), and give up after
`retries` more tries. A server that refuses the structured-output request is asked
again with `json_object` and the schema in the prompt (and beside `json_object`, where
llama.cpp's servers enforce it as a grammar), then with no `response_format` at all; a model that wants `max_completion_tokens` or only its default temperature is
accommodated the same way. What was learnt holds for the rest of the review.

Once the model is unavailable (retries spent, authentication refused, model not found)
the client says so to every later request without sending it.

A server on this machine is asked to stream its answer: every chunk that arrives resets
the read timeout, so a slow local model that is still writing is not abandoned (and then
asked again while its one slot is still busy with the first request).
"""

from __future__ import annotations

import email.utils
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import openai

from review_copies.llm.options import LLMOptions

# The ways of asking for JSON, most exact first. "json_object+schema" is `json_object` with
# the schema beside it, which llama.cpp's servers (llama-server, llama-cpp-python) turn into
# a grammar the model cannot leave; servers that refuse the extra key get plain
# `json_object`. Both are reported as "json_object" (contract section 4).
MODES = ("json_schema", "json_object+schema", "json_object", "none")
RETRY_STATUS = frozenset({408, 409, 425, 429})
# Waiting longer than this for one retry is worse than going on without the model.
MAX_WAIT_SECONDS = 60.0
_SCHEMA_NAME = "review_findings"


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str
    schema: dict[str, Any]
    # The schema as text, appended to the system prompt where the server does not enforce it.
    schema_note: str


@dataclass(frozen=True)
class Completion:
    content: str
    finish_reason: str | None
    refusal: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    mode: str
    # Prompt tokens the server answered from its prefix cache (OpenAI's
    # usage.prompt_tokens_details.cached_tokens); None when it does not say.
    cached_tokens: int | None = None


@dataclass(frozen=True)
class Shape:
    """How requests are phrased for this server; only ever moves to a more modest form."""

    mode: int = 0
    token_param: str = "max_tokens"
    temperature: bool = True
    # Streamed answers end with a usage chunk when asked (`stream_options`); servers that
    # refuse the option get streams without it, and their tokens are estimated.
    stream_usage: bool = True


class Unavailable(Exception):
    """The model cannot be reached or will not serve us: no request after this one is sent."""


class RequestFailed(Exception):
    """This request got no answer worth reading; the other requests may still get one."""


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms` or `Retry-After`."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_wait(attempt: int, base: float, asked: float | None, jitter: Callable[[], float] = random.random) -> float | None:
    """The wait before retry number attempt+1, or None when the server asks for too long."""
    if asked is not None:
        return asked if asked <= MAX_WAIT_SECONDS else None
    # Half fixed, half random: concurrent requests that failed together do not retry together.
    wait = min(MAX_WAIT_SECONDS, base * 2**attempt)
    return wait * (0.5 + 0.5 * jitter())


def _short(text: object, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: the `message` of its error object, else the client's text."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"].strip():
        return body["message"]
    return re.sub(r"^Error code: \d+ - ", "", exc.message)


def describe(exc: Exception, opts: LLMOptions) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"no answer within {opts.timeout:g} s"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot connect to {opts.endpoint}"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {_short(server_message(exc))}"
    return _short(exc)


class ModelClient:
    def __init__(self, opts: LLMOptions, sleep: Callable[[float], None] = time.sleep) -> None:
        self.opts = opts
        self._client = openai.OpenAI(api_key=opts.api_key, base_url=opts.base_url, timeout=opts.timeout, max_retries=0)
        self._sleep = sleep
        self._lock = threading.Lock()
        self.shape = Shape()
        self.calls = 0
        self.retries = 0
        self.down: str | None = None

    # ------------------------------------------------------------------ public

    def complete(self, prompt: Prompt) -> Completion:
        attempt = 0
        while True:
            if self.down is not None:
                raise Unavailable(self.down)
            shape = self.shape
            try:
                return self._completion(self._send(prompt, shape), shape)
            except openai.APIStatusError as exc:
                if exc.status_code not in (400, 422) and self._step_down_format(shape, exc):
                    continue  # llama.cpp's server refuses json_schema with a 500 naming response_format
                if exc.status_code in (400, 422):
                    if self._adapt(shape, exc):
                        continue
                    raise RequestFailed(describe(exc, self.opts)) from None
                if exc.status_code in (401, 403, 404):
                    raise self._give_up(describe(exc, self.opts)) from None
                if exc.status_code not in RETRY_STATUS and exc.status_code < 500:
                    raise RequestFailed(describe(exc, self.opts)) from None
                failure: Exception = exc
                asked = retry_after(exc.response.headers)
            except openai.APITimeoutError as exc:
                if self.opts.local:
                    # A local server keeps computing the request we gave up on: asking again
                    # would queue the same prompt behind it and double the wait.
                    raise self._give_up(f"{describe(exc, self.opts)}; a local server is not asked again (raise llm-timeout for a slow model)") from None
                failure, asked = exc, None
            except openai.APIConnectionError as exc:
                failure, asked = exc, None
            except openai.APIError as exc:
                raise RequestFailed(describe(exc, self.opts)) from None
            if attempt >= self.opts.retries:
                tries = f"{attempt + 1} tr{'ies' if attempt else 'y'}"
                raise self._give_up(f"{describe(failure, self.opts)}, after {tries}") from None
            wait = backoff_wait(attempt, self.opts.backoff, asked)
            if wait is None:
                raise self._give_up(f"{describe(failure, self.opts)}, and it asked to wait {asked:.0f} s") from None
            self._sleep(wait)
            attempt += 1
            with self._lock:
                self.retries += 1

    # ------------------------------------------------------------------ internals

    def _give_up(self, reason: str) -> Unavailable:
        with self._lock:
            self.down = self.down or reason
        return Unavailable(self.down)

    def _send(self, prompt: Prompt, shape: Shape) -> Any:
        mode = MODES[shape.mode]
        system = prompt.system if mode == "json_schema" else prompt.system + prompt.schema_note
        kwargs: dict[str, Any] = {
            "model": self.opts.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt.user}],
            shape.token_param: self.opts.max_output_tokens,
        }
        if shape.temperature:
            kwargs["temperature"] = 0
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": _SCHEMA_NAME, "strict": True, "schema": prompt.schema}}
        elif mode == "json_object+schema":
            kwargs["response_format"] = {"type": "json_object", "schema": prompt.schema}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        if self.opts.local:
            kwargs["stream"] = True
            if shape.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        with self._lock:
            self.calls += 1
        return self._client.chat.completions.create(**kwargs)

    def _step_down_format(self, used: Shape, exc: openai.APIStatusError) -> bool:
        """An error of any status that names the response format: try the next, more modest
        one before counting it as a failure to retry."""
        text = f"{server_message(exc)} {exc.body}".lower()
        if used.mode + 1 >= len(MODES) or not any(word in text for word in ("response_format", "json_schema", "response format")):
            return False
        with self._lock:
            if self.shape == used:
                self.shape = replace(used, mode=used.mode + 1)
        return True

    def _adapt(self, used: Shape, exc: openai.APIStatusError) -> bool:
        """Phrase requests more modestly after a 400/422 that says why; False when nothing is left to try."""
        text = f"{server_message(exc)} {exc.body}".lower()
        if "context" in text and any(word in text for word in ("length", "too long", "maximum", "exceed")):
            return False
        if used.stream_usage and "stream_options" in text:
            changed = replace(used, stream_usage=False)
        elif used.token_param == "max_tokens" and "max_tokens" in text and ("max_completion_tokens" in text or "unsupported" in text):
            changed = replace(used, token_param="max_completion_tokens")
        elif used.temperature and "temperature" in text:
            changed = replace(used, temperature=False)
        elif used.mode + 1 < len(MODES):
            # Servers word a refused response_format in many ways (or not at all): step down.
            changed = replace(used, mode=used.mode + 1)
        else:
            return False
        with self._lock:
            if self.shape == used:
                self.shape = changed
        return True

    def _completion(self, response: Any, shape: Shape) -> Completion:
        if isinstance(response, openai.Stream):
            response = _collected(response)
        choices = getattr(response, "choices", None)
        if not choices:
            raise RequestFailed("the server's answer is not a chat completion (no choices)")
        choice = choices[0]
        message = getattr(choice, "message", None)
        usage = getattr(response, "usage", None)
        return Completion(
            content=(getattr(message, "content", None) or ""),
            finish_reason=getattr(choice, "finish_reason", None),
            refusal=getattr(message, "refusal", None),
            prompt_tokens=_count(usage, "prompt_tokens"),
            completion_tokens=_count(usage, "completion_tokens"),
            mode=MODES[shape.mode].split("+")[0],
            cached_tokens=_count(getattr(usage, "prompt_tokens_details", None), "cached_tokens"),
        )


@dataclass(frozen=True)
class _Message:
    content: str
    refusal: str | None


@dataclass(frozen=True)
class _Choice:
    message: _Message
    finish_reason: str | None


@dataclass(frozen=True)
class _Collected:
    """A streamed answer put back together in the shape of a chat completion."""

    choices: list[_Choice]
    usage: Any


def _collected(stream: openai.Stream[Any]) -> _Collected:
    parts: list[str] = []
    refusal: list[str] = []
    finish: str | None = None
    usage = None
    try:
        for chunk in stream:
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or ():
                delta = getattr(choice, "delta", None)
                if getattr(delta, "content", None):
                    parts.append(delta.content)
                if getattr(delta, "refusal", None):
                    refusal.append(delta.refusal)
                finish = getattr(choice, "finish_reason", None) or finish
    except openai.APIError:
        raise
    except Exception as exc:
        # Raised by the HTTP library while the stream is read, outside the client's own
        # wrapping (httpx under openai 1.x, httpx2 later): matched by class name.
        kinds = {c.__name__ for c in type(exc).__mro__}
        if "TimeoutException" in kinds:
            raise openai.APITimeoutError(request=_request_of(exc)) from None
        if "TransportError" in kinds:
            raise openai.APIConnectionError(request=_request_of(exc)) from None
        raise
    finally:
        stream.close()
    return _Collected([_Choice(_Message("".join(parts), "".join(refusal) or None), finish)], usage)


def _request_of(exc: Exception) -> Any:
    try:
        return exc.request  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises when no request was attached
        return None


def _count(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) and value >= 0 else None
