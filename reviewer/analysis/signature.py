"""What a function accepts, read from its definition: the index tells apart the functions of
one name by the calls that could bind to each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst


@dataclass(frozen=True)
class Signature:
    """What a function accepts (after `self`): a call that could not bind to it is a call
    of another function of the same name (`conv.transformation(x, emb=e)` is not
    `transformation(self, x, x_0)`'s)."""

    positional: tuple[str, ...]
    required: int  # the leading positional parameters without a default
    keyword_only: frozenset[str] = frozenset()
    varargs: bool = False
    varkw: bool = False

    def admits(self, call: dict[str, Any]) -> bool:
        """Whether a call the index recorded (`pos`, `kw`, `spread`) could bind to it."""
        if call.get("spread", True):
            return True
        n, keywords = len(call["pos"]), set(call["kw"])
        if n > len(self.positional) and not self.varargs:
            return False
        if not self.varkw and keywords - set(self.positional[n:]) - self.keyword_only:
            return False
        return all(p in keywords for p in self.positional[n:self.required])


def signature_of(fn: cst.FunctionDef, method: bool) -> Signature:
    """What the function accepts (after `self` for a method), for the index's questions about its calls."""
    params = fn.params
    positional = [p for p in (*params.posonly_params, *params.params)][1 if method else 0 :]
    required = next((i for i, p in enumerate(positional) if p.default is not None), len(positional))
    return Signature(
        positional=tuple(p.name.value for p in positional),
        required=required,
        keyword_only=frozenset(p.name.value for p in params.kwonly_params),
        varargs=isinstance(params.star_arg, cst.Param),
        varkw=params.star_kwarg is not None,
    )
