"""The LLM stage of the pipeline: plan the requests, send them (bounded concurrency,
cache first), check every answer, merge what survives with the static findings, and
account for tokens, cost and coverage."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import IO

from review_copies.llm import coverage
from review_copies.llm.cache import AnswerCache, Cached, request_key
from review_copies.llm.client import ModelClient, Prompt, RequestFailed, Unavailable
from review_copies.llm.context import focus
from review_copies.llm.merge import merge
from review_copies.llm.options import LLMOptions, build_options
from review_copies.llm.prompts import GUIDANCE_LEVELS, PromptBook, answer_schema, load_book, render_schema_note, render_system, render_user
from review_copies.llm.requests import LLMRequest, RequestPlan, plan_requests
from review_copies.llm.tokens import estimate_tokens
from review_copies.llm.validate import AnswerError, Checked, Shown, check_answer, unusable
from review_copies.model.findings import Category, Finding, Note
from review_copies.model.report import LLMStats, Report
from review_copies.model.settings import PROG, Settings
from review_copies.review.hunks import TensorHunk
from review_copies.review.static import StaticResult
from review_copies.review.suppression import directives, is_suppressed
from review_copies.rules import Rule


@dataclass
class RequestResult:
    request: LLMRequest
    checked: Checked = field(default_factory=Checked)
    failure: str | None = None  # why the request's hunks count as not reviewed
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    mode: str | None = None


@dataclass(frozen=True)
class Prepared:
    """What every request of one review shares."""

    system: str
    schema: dict
    schema_note: str
    plan: RequestPlan


class LLMStage:
    def __init__(self, opts: LLMOptions, rules: Sequence[type[Rule]], categories: Sequence[Category], stderr: IO[str]) -> None:
        self.opts = opts
        self.rules = tuple(rules)
        self.categories = tuple(categories)
        self.stderr = stderr
        self.cache = AnswerCache(opts.cache_dir)

    def __call__(self, report: Report, static: StaticResult) -> Report:
        llm = replace(report.stats.llm, model=self.opts.model)
        if not self.categories:
            return _with(report, llm, coverage=[coverage.no_categories(self.opts.model)])
        if not static.hunks:
            return _with(report, llm, coverage=[coverage.nothing_to_send(self.opts.model)])
        prepared = self.prepare(load_book(), static.hunks, [f for f in report.findings if f.source != "llm"])
        client = ModelClient(self.opts)
        outcomes = self._run(prepared, client, static.texts)
        return self._merge(self._account(report, prepared.plan, outcomes, client), outcomes, static.texts)

    # ------------------------------------------------------------------ planning

    def prepare(self, book: PromptBook, hunks: Sequence[TensorHunk], static: Sequence[Finding]) -> Prepared:
        system = render_system(book, self.categories)
        schema = answer_schema(book, self.categories)
        note = render_schema_note(book, schema)
        plan = plan_requests(
            [focus(h) for h in hunks],
            static,
            lambda blocks: render_user(book, blocks, self.categories, self.rules),
            # Servers that get the schema in the prompt pay for it: plan for the larger prompt.
            estimate_tokens(system + note),
            self.opts.request_tokens,
            self.opts.budget_tokens,
            lighter=[(level, partial(render_user, book, categories=self.categories, rules=self.rules, level=level)) for level in GUIDANCE_LEVELS[1:]],
        )
        return Prepared(system, schema, note, plan)

    # ------------------------------------------------------------------ sending

    def _run(self, prepared: Prepared, client: ModelClient, texts: dict[str, str]) -> list[RequestResult]:
        requests = prepared.plan.requests
        if not requests:
            return []
        workers = max(1, min(self.opts.concurrency, len(requests)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="review-copies-llm") as pool:
            return list(pool.map(lambda r: self._one(prepared, client, texts, r), requests))

    def _one(self, prepared: Prepared, client: ModelClient, texts: dict[str, str], request: LLMRequest) -> RequestResult:
        try:
            return self._ask(prepared, client, texts, request)
        except Exception as exc:  # a bug of ours must not cost the static findings
            if os.environ.get("REVIEW_COPIES_DEBUG"):
                raise
            return RequestResult(request, failure=f"internal error reading the answer: {type(exc).__name__}: {exc}")

    def _ask(self, prepared: Prepared, client: ModelClient, texts: dict[str, str], request: LLMRequest) -> RequestResult:
        key = request_key(
            self.opts.model,
            self.opts.endpoint,
            {"system": prepared.system, "user": request.user, "schema": prepared.schema, "max_output_tokens": self.opts.max_output_tokens},
        )
        outcome = RequestResult(request)
        hit = self.cache.get(key)
        if hit is not None:
            outcome.cached = True
            content, cut_off = hit.content, False
        else:
            answered = self._from_model(prepared, client, request, outcome)
            if answered is None:
                return outcome
            content, cut_off = answered
        self._check(outcome, content, cut_off, Shown(request.hunks, texts, frozenset(self.categories)))
        if outcome.failure is None and not outcome.cached:
            self.cache.put(key, Cached(content, outcome.prompt_tokens, outcome.completion_tokens))
        return outcome

    def _from_model(self, prepared: Prepared, client: ModelClient, request: LLMRequest, outcome: RequestResult) -> tuple[str, bool] | None:
        """The answer's text and whether it was cut off; None (and the reason on the
        outcome) when there is no answer to read."""
        try:
            completion = client.complete(Prompt(prepared.system, request.user, prepared.schema, prepared.schema_note))
        except Unavailable as exc:
            outcome.failure = f"the model was unavailable: {exc}"
            return None
        except RequestFailed as exc:
            outcome.failure = f"the request failed: {exc}"
            return None
        outcome.mode = completion.mode
        # Servers that report no usage are counted by the estimate, and the stats say so.
        outcome.estimated = completion.prompt_tokens is None or completion.completion_tokens is None
        outcome.prompt_tokens = request.tokens if completion.prompt_tokens is None else completion.prompt_tokens
        outcome.completion_tokens = estimate_tokens(completion.content) if completion.completion_tokens is None else completion.completion_tokens
        outcome.cached_tokens = completion.cached_tokens or 0
        if completion.refusal:
            outcome.failure = f"the model refused to answer: {' '.join(completion.refusal.split())[:160]}"
            return None
        return completion.content, completion.finish_reason == "length"

    def _check(self, outcome: RequestResult, content: str, cut_off: bool, shown: Shown) -> None:
        try:
            outcome.checked = check_answer(content, shown)
        except AnswerError as exc:
            reason = str(exc)
            if cut_off:
                reason += f" (it was cut off at llm-max-output-tokens = {self.opts.max_output_tokens})"
            outcome.checked = Checked(dropped=unusable(shown, reason))
            outcome.failure = reason

    # ------------------------------------------------------------------ results

    def _account(self, report: Report, plan: RequestPlan, outcomes: list[RequestResult], client: ModelClient) -> Report:
        prompt_tokens = report.stats.llm.prompt_tokens + sum(o.prompt_tokens for o in outcomes)
        completion_tokens = report.stats.llm.completion_tokens + sum(o.completion_tokens for o in outcomes)
        left_out = list(plan.left_out) + [(h, o.failure) for o in outcomes if o.failure for h in o.request.hunks]
        total = len(plan.left_out) + sum(len(o.request.hunks) for o in outcomes)
        reviewed = total - len(left_out)
        cached = sum(o.cached for o in outcomes)
        modes = sorted({o.mode for o in outcomes if o.mode})
        cost = self._cost(prompt_tokens, completion_tokens)
        llm = replace(
            report.stats.llm,
            model=self.opts.model,
            calls=report.stats.llm.calls + client.calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_prompt_tokens=report.stats.llm.cached_prompt_tokens + sum(o.cached_tokens for o in outcomes if not o.cached),
            requests=len(outcomes),
            cache_hits=cached,
            retries=client.retries,
            hunks_reviewed=reviewed,
            hunks_not_reviewed=len(left_out),
            tokens_estimated=any(o.estimated for o in outcomes),
            planned_prompt_tokens=plan.tokens,
            response_format=", ".join(modes) if modes else None,
            cost_usd=round(cost, 6) if cost is not None else None,
        )
        lighter = sum(1 for r in plan.requests if r.guidance != "full")
        lines = [coverage.summary_line(self.opts.model, reviewed, total, len(outcomes), cached, lighter, self.opts.request_tokens), *coverage.left_out_lines(left_out)]
        if client.down is not None:
            where = f"{self.opts.model} at {self.opts.endpoint}"
            self.stderr.write(f"{PROG}: the LLM ({where}) is unavailable ({client.down}); going on with the static findings\n")
        notes = [Note(self.cache.problem)] if self.cache.problem else []
        return _with(report, llm, coverage=lines, notes=notes)

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.opts.price_input is None and self.opts.price_output is None:
            return None
        return (prompt_tokens * (self.opts.price_input or 0.0) + completion_tokens * (self.opts.price_output or 0.0)) / 1_000_000

    def _merge(self, report: Report, outcomes: list[RequestResult], texts: dict[str, str]) -> Report:
        found: list[Finding] = []
        dropped = list(report.dropped)
        suppressed = 0
        for outcome in outcomes:
            dropped.extend(outcome.checked.dropped)
            for finding in outcome.checked.findings:
                if is_suppressed(finding, directives(texts.get(finding.path, ""))):
                    suppressed += 1
                else:
                    found.append(finding)
        merged = merge(report.findings, found)
        llm = replace(
            report.stats.llm,
            findings=len(found) - merged.merged,
            merged_with_static=merged.merged,
            lines_corrected=sum(o.checked.corrected for o in outcomes),
            fixes_dropped=sum(o.checked.fixes_dropped for o in outcomes),
            suppressed=report.stats.llm.suppressed + suppressed,
        )
        return replace(_with(report, llm), findings=merged.findings, dropped=dropped)


def _with(report: Report, llm: LLMStats, coverage: Sequence[str] = (), notes: Sequence[Note] = ()) -> Report:
    """`report` with the LLM's stats, and its coverage lines and notes added."""
    return replace(
        report,
        stats=replace(report.stats, llm=llm),
        coverage=[*report.coverage, *coverage],
        notes=[*report.notes, *notes],
    )


def chosen_categories(select: Iterable[str], ignore: Iterable[str], rules: Sequence[type[Rule]]) -> list[Category]:
    """The categories the LLM is asked about: those the configuration selects (by name or
    through its selected rules), less those it ignores by name."""
    selected, ignored = set(select), set(ignore)
    wanted = set(Category) if not selected else {c for c in Category if c.value in selected} | {r.category for r in rules}
    return [c for c in Category if c in wanted and c.value not in ignored]


def llm_stage(settings: Settings, rules: Sequence[type[Rule]], repo_root: Path | None, stderr: IO[str]) -> LLMStage:
    """The stage the review runs when the LLM is on; nothing connects before it runs."""
    if settings.api_key is None:
        raise ValueError("the LLM stage needs an API key; the command line reviews offline without one")
    opts = build_options(settings.model, settings.api_key, settings.base_url, settings.llm, repo_root, dict(os.environ))
    if opts.local_with_hosted_defaults():
        stderr.write(
            f"review-copies: warning: {opts.endpoint} is on this machine and llm-timeout is the hosted API's {opts.timeout:g} s; "
            "a local model may need more (llm-timeout in [tool.review-copies]), and a timed-out request is not retried\n"
        )
    return LLMStage(opts, rules, chosen_categories(settings.select, settings.ignore, rules), stderr)
