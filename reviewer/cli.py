"""The `review-copies` command line: flags, the environment and `[tool.review-copies]`
resolved into one `Settings`, then the review (`app`) or `--post-review` (`github`).
Nothing imports this module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO, NoReturn

from review_copies import __version__, config, output
from review_copies.app import exit_status, review_changeset, write_report
from review_copies.github import post_review
from review_copies.github.runner_outputs import step_outputs, write_outputs
from review_copies.model.errors import UsageError
from review_copies.model.settings import DEFAULT_KEEP_WARM, DEFAULT_MODEL, DEFAULT_SANDBOX_BUDGET, DEVICES, FAIL_ON, PROG, ChangeSpec, FileConfig, Settings
from review_copies.source.changes import build_changeset


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, exit 2: usage errors are input errors like any other.
        raise UsageError(message)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds greater than 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Review how a PyTorch change copies, shares and mutates tensors.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="limit the review to these files or folders")
    p.add_argument("--repo", metavar="DIR", help="the git repository (default: the one around the current folder)")
    p.add_argument("--base", metavar="REV", help="review what --head changed since its merge base with REV")
    p.add_argument("--head", metavar="REV", help="the revision under review (default: the working tree)")
    p.add_argument("--diff", metavar="FILE", help="review a unified diff read from FILE ('-' = standard input)")
    p.add_argument("--all", action="store_true", help="review whole files, not only changed lines")
    p.add_argument("--format", choices=output.names(), default="text")
    p.add_argument("--output", metavar="FILE", help="write the report there instead of standard output")
    p.add_argument("--offline", action="store_true", help="never contact an LLM; static rules and sandbox only")
    p.add_argument("--model", metavar="NAME", help="the model of the OpenAI-compatible endpoint")
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible endpoint (default: OPENAI_BASE_URL)")
    p.add_argument("--no-sandbox", action="store_true", help="report without executing anything")
    p.add_argument(
        "--sandbox", choices=SANDBOX_MODES, default="isolated",
        help="isolated (default): run the reviewed code only inside namespaces, and not at all where the host has none; "
        "unsafe-local: run it anyway, for your own code on your own machine",
    )
    p.add_argument("--device", choices=DEVICES, help="where the sandbox runs probes (default: auto)")
    p.add_argument(
        "--sandbox-budget", type=_seconds, metavar="SECONDS",
        help=f"the most sandbox time one review may take (default: {DEFAULT_SANDBOX_BUDGET:g}); findings past it are shown unverified",
    )
    p.add_argument("--fail-on", choices=FAIL_ON, help="exit 1 when a finding is at or above this severity (default: warning)")
    p.add_argument("--post-review", action="store_true", help="post the findings as one review on the GitHub pull request")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p


def resolve_settings(args: argparse.Namespace, file_config: FileConfig, env: dict[str, str]) -> Settings:
    """Flags first, then the configuration file, then the environment, then the defaults."""
    api_key = env.get("OPENAI_API_KEY") or None
    return Settings(
        change=ChangeSpec(repo=args.repo, base=args.base, head=args.head, diff=args.diff, all=args.all, paths=tuple(args.paths)),
        fmt=args.format,
        output=args.output,
        offline=args.offline or api_key is None,
        model=args.model or file_config.model or env.get("REVIEW_COPIES_MODEL") or DEFAULT_MODEL,
        base_url=args.base_url or (None if untrusted_repository(args, env) else file_config.base_url) or env.get("OPENAI_BASE_URL") or None,
        api_key=api_key,
        sandbox=not args.no_sandbox and (file_config.sandbox if file_config.sandbox is not None else True),
        device=args.device or file_config.device or "auto",
        fail_on=args.fail_on or file_config.fail_on or "warning",
        post_review=args.post_review,
        select=file_config.select,
        ignore=file_config.ignore,
        exclude=file_config.exclude,
        llm=file_config.llm,
        sandbox_budget=args.sandbox_budget or file_config.sandbox_budget or DEFAULT_SANDBOX_BUDGET,
        sandbox_cache_dir=file_config.sandbox_cache_dir,
        sandbox_unsafe_local=args.sandbox == "unsafe-local",
        untrusted=untrusted_repository(args, env),
        sandbox_keep_warm=file_config.sandbox_keep_warm if file_config.sandbox_keep_warm is not None else (0.0 if env.get("CI") else DEFAULT_KEEP_WARM),
    )


SANDBOX_MODES = ("isolated", "unsafe-local")


def untrusted_repository(args: argparse.Namespace, env: dict[str, str]) -> bool:
    """In GitHub Actions and with --post-review the reviewed repository may be a stranger's
    pull request: its configuration may not choose where the API key is sent."""
    return bool(args.post_review or env.get("GITHUB_ACTIONS"))


def _use_color(settings: Settings, stream: IO[str]) -> bool:
    if settings.fmt != "text" or settings.output:
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(os.environ.get("FORCE_COLOR")) or (hasattr(stream, "isatty") and stream.isatty())


def run(settings: Settings, stdout: IO[str], stderr: IO[str]) -> int:
    if settings.post_review:
        return post_review(settings, stdout, stderr)
    changeset = build_changeset(settings.change)
    report, rules = review_changeset(settings, changeset, stderr)
    write_report(settings, report, rules, changeset.description, stdout, _use_color(settings, stdout))
    if os.environ.get("GITHUB_OUTPUT"):
        # Inside a GitHub Actions step: the finding counts become the step's outputs.
        problem = write_outputs(os.environ["GITHUB_OUTPUT"], step_outputs(report))
        if problem:
            stderr.write(f"{PROG}: warning: {problem}\n")
    return exit_status(report, settings.fail_on)


def main(argv: Sequence[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        file_config = config.load(config.config_root(ChangeSpec(repo=args.repo)))
        settings = resolve_settings(args, file_config, dict(os.environ))
        if file_config.base_url and not args.base_url and settings.untrusted:
            stderr.write(f"{PROG}: warning: base-url in the reviewed repository's configuration is ignored here (GitHub Actions or --post-review): "
                         "a pull request may not choose where the API key goes; set --base-url or OPENAI_BASE_URL in the workflow\n")
        if settings.api_key is None and not args.offline:
            stderr.write(f"{PROG}: OPENAI_API_KEY is not set; reviewing offline (static rules and sandbox only)\n")
        return run(settings, stdout, stderr)
    except UsageError as exc:
        stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug of ours: still one line, never a traceback
        if os.environ.get("REVIEW_COPIES_DEBUG"):
            raise
        stderr.write(f"{PROG}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
        return 2
