"""A token count without a tokenizer download.

The budget is planned before anything is sent, for any model behind any endpoint, so it
cannot depend on one model's vocabulary (and tiktoken would fetch its encoding file from
the network on first use). Counting words, short digit runs, punctuation runs, whitespace
runs and non-ASCII characters as one piece each over-counts: on torch's own sources this
estimate is 1.0 to 1.5 times the o200k_base count (median 1.27; benchmarks/llm_tokens.py
measures it), so a plan that fits by the estimate fits for real.
"""

from __future__ import annotations

import re

_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|[^\w\s]+|\s+|[^\x00-\x7f]")


def estimate_tokens(text: str) -> int:
    return len(_PIECES.findall(text))
