"""The GitHub side: post a review on the pull request of a GitHub Actions run.

`post_review` is what `review-copies --post-review` runs; `python -m review_copies.github
post-report` posts a review saved by an unprivileged job (the fork-safe two-workflow
setup). Both end in `deliver`, which posts one review with inline comments, never the
same finding twice, and falls back to annotations and the job summary when it cannot.
"""

from review_copies.github.post_review import post_review

__all__ = ["post_review"]
