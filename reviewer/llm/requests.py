"""Split the tensor hunks into requests under the token limits, and say what did not fit.

Hunks go in diff order (path, then line), whole: a hunk is never cut, so the model
always sees the enclosing function it is asked about. A request holds hunks until the
next would push it past `request_tokens`; the review stops adding requests before the
total passes `budget_tokens`. Later, smaller hunks may still fit after a large one did
not, so as much of the change as the budget allows is reviewed. A hunk too large for a
request with the full guidance (a local model's small context window) is planned again
with each lighter rendering in turn (`lighter`: the rules' examples left out, then the
guidance): reviewed with less help rather than not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from review_copies.llm.prompts import FileBlock
from review_copies.llm.tokens import estimate_tokens
from review_copies.model.findings import Finding
from review_copies.review.hunks import TensorHunk

OVER_REQUEST = "larger than one request may be (llm-request-tokens = {limit})"
OVER_BUDGET = "over the review's token budget (llm-budget-tokens = {limit})"


@dataclass(frozen=True)
class LLMRequest:
    """One call to the model: its user message and what it shows."""

    index: int
    blocks: tuple[FileBlock, ...]
    user: str
    tokens: int  # estimated, system prompt included
    # Which rendering it was sent with: "full", or a lighter one the hunks needed to fit.
    guidance: str = "full"

    @property
    def hunks(self) -> tuple[TensorHunk, ...]:
        return tuple(h for b in self.blocks for h in b.hunks)


@dataclass
class RequestPlan:
    requests: list[LLMRequest] = field(default_factory=list)
    left_out: list[tuple[TensorHunk, str]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.requests)


def blocks_for(hunks: Sequence[TensorHunk], static: Sequence[Finding]) -> tuple[FileBlock, ...]:
    """Group consecutive hunks of one file, each file with the static findings inside its hunks."""
    grouped: list[list[TensorHunk]] = []
    for hunk in hunks:
        if grouped and grouped[-1][0].path == hunk.path:
            grouped[-1].append(hunk)
        else:
            grouped.append([hunk])
    out = []
    for group in grouped:
        path = group[0].path
        inside = tuple(f for f in static if f.path == path and any(h.start <= f.line <= h.end for h in group))
        out.append(FileBlock(path=path, hunks=tuple(group), static=inside))
    return tuple(out)


Render = Callable[[Sequence[FileBlock]], str]


def plan_requests(
    hunks: Sequence[TensorHunk],
    static: Sequence[Finding],
    render: Render,
    system_tokens: int,
    request_tokens: int,
    budget_tokens: int,
    lighter: Sequence[tuple[str, Render]] = (),
) -> RequestPlan:
    plan = RequestPlan()
    remaining = sorted(hunks, key=lambda h: (h.path, h.start, h.end))
    for level, how in (("full", render), *lighter):
        remaining = _plan_pass(plan, remaining, static, how, level, system_tokens, request_tokens, budget_tokens)
        if not remaining:
            break
    plan.left_out.extend((h, OVER_REQUEST.format(limit=request_tokens)) for h in remaining)
    plan.left_out.sort(key=lambda item: (item[0].path, item[0].start, item[0].end))
    return plan


def _plan_pass(
    plan: RequestPlan,
    hunks: Sequence[TensorHunk],
    static: Sequence[Finding],
    render: Render,
    level: str,
    system_tokens: int,
    request_tokens: int,
    budget_tokens: int,
) -> list[TensorHunk]:
    """Add requests for `hunks` rendered by `render`; return those too large for one request."""
    too_large: list[TensorHunk] = []
    current: list[TensorHunk] = []
    current_cost = 0
    spent = plan.tokens

    def cost(group: Sequence[TensorHunk]) -> tuple[str, int]:
        user = render(blocks_for(group, static))
        return user, system_tokens + estimate_tokens(user)

    def close() -> None:
        nonlocal current, current_cost, spent
        if current:
            user, tokens = cost(current)
            plan.requests.append(LLMRequest(len(plan.requests), blocks_for(current, static), user, tokens, level))
            spent += tokens
        current, current_cost = [], 0

    for hunk in hunks:
        _, together = cost([*current, hunk])
        if together <= request_tokens and spent + together <= budget_tokens:
            current.append(hunk)
            current_cost = together
            continue
        _, alone = cost([hunk])
        if alone > request_tokens:
            too_large.append(hunk)
        elif current and spent + current_cost + alone <= budget_tokens:
            close()
            current, current_cost = [hunk], alone
        else:
            plan.left_out.append((hunk, OVER_BUDGET.format(limit=budget_tokens)))
    close()
    return too_large
