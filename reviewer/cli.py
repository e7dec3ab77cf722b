"""The `review-copies` command line: flags, the environment and `[tool.review-copies]`
resolved into one `Settings`, then the review (`app`) or `--post-review` (`github`).
Nothing imports this module."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import IO, NoReturn

from review_copies import __version__, config, output
from review_copies.app import exit_status, review_changeset, write_report, write_text
from review_copies.github import post_review
from review_copies.github.runner_outputs import step_outputs, write_outputs
from review_copies.model.errors import UsageError
from review_copies.model.settings import DEFAULT_KEEP_WARM, DEFAULT_MODEL, DEFAULT_SANDBOX_BUDGET, DEVICES, FAIL_ON, PROG, ChangeSpec, FileConfig, Settings
from review_copies.output import RenderContext
from review_copies.output.catalogue import rule_page, rules_table, statistics
from review_copies.output.common import shown_path
from review_copies.output.context import NO_WRAP
from review_copies.output.progress import Progress
from review_copies.review.apply import FixResult, apply_fixes
from review_copies.rules import all_rules, known_selector, rule_by_code
from review_copies.source.changes import build_changeset
from review_copies.source.hook import pre_commit_change


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


COLOR_MODES = ("auto", "always", "never")


def _selectors(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if not known_selector(name):
            raise argparse.ArgumentTypeError(f"'{name}' is no category or rule (see `{PROG} rules`)")
    return names


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
    p.add_argument("--select", metavar="CODES", action="append", type=_selectors, help="only these rules or categories, comma-separated (replaces the configuration's select)")
    p.add_argument("--ignore", metavar="CODES", action="append", type=_selectors, help="leave out these rules or categories, comma-separated (replaces the configuration's ignore)")
    p.add_argument("--fix", action="store_true", help="apply the reported findings' suggestions to the working tree (never a refuted one) and report what is left")
    p.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead of the findings")
    p.add_argument("--explain", "--show-docs", action="store_true", help="after the findings, explain each rule that found something")
    p.add_argument("--color", choices=COLOR_MODES, default="auto", help="colour the text report: auto (a terminal, unless NO_COLOR is set), always, never")
    p.add_argument(
        "--pre-commit", action="store_true",
        help="run as a pre-commit hook: the staged change of the files given, what --to-ref changed since --from-ref, or the files whole under --all-files",
    )
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
        select=_flat(args.select) if args.select else file_config.select,
        ignore=_flat(args.ignore) if args.ignore else file_config.ignore,
        exclude=file_config.exclude,
        llm=file_config.llm,
        sandbox_budget=args.sandbox_budget or file_config.sandbox_budget or DEFAULT_SANDBOX_BUDGET,
        sandbox_cache_dir=file_config.sandbox_cache_dir,
        sandbox_unsafe_local=args.sandbox == "unsafe-local",
        untrusted=untrusted_repository(args, env),
        sandbox_keep_warm=file_config.sandbox_keep_warm if file_config.sandbox_keep_warm is not None else (0.0 if env.get("CI") else DEFAULT_KEEP_WARM),
        color=args.color,
        explain=args.explain,
        statistics=args.statistics,
        fix=args.fix,
    )


def _flat(groups: list[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(name for group in groups for name in group)


SANDBOX_MODES = ("isolated", "unsafe-local")


def untrusted_repository(args: argparse.Namespace, env: dict[str, str]) -> bool:
    """In GitHub Actions and with --post-review the reviewed repository may be a stranger's
    pull request: its configuration may not choose where the API key is sent."""
    return bool(args.post_review or env.get("GITHUB_ACTIONS"))


def _use_color(settings: Settings, stream: IO[str]) -> bool:
    if settings.fmt != "text" or settings.output or settings.color == "never":
        return False
    if settings.color == "always":
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(os.environ.get("FORCE_COLOR")) or _is_terminal(stream)


def _is_terminal(stream: IO[str]) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def _width(stream: IO[str]) -> int:
    """The terminal's columns (COLUMNS wins, as for every tool). Off a terminal nothing is
    wrapped, as ruff does: a CI log or a pipe gets one line per sentence, easy to grep."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if _is_terminal(stream):
        return shutil.get_terminal_size((100, 24)).columns
    return NO_WRAP


def _check_combinations(settings: Settings) -> None:
    if settings.fix and (settings.post_review or settings.change.head or settings.change.diff):
        raise UsageError("--fix changes the working tree: use it on a review of the working tree (no --head, --diff or --post-review)")
    if settings.statistics and settings.fmt != "text":
        raise UsageError("--statistics prints a text table: leave out --format")


def run(settings: Settings, stdout: IO[str], stderr: IO[str]) -> int:
    _check_combinations(settings)
    if settings.post_review:
        return post_review(settings, stdout, stderr)
    changeset = build_changeset(settings.change)
    progress = Progress(stderr) if _is_terminal(stderr) else None
    try:
        report, rules = review_changeset(settings, changeset, stderr, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    if settings.fix:
        if changeset.root is None:
            raise UsageError("--fix needs a repository or a folder to write into")
        result = apply_fixes(report, changeset.root)
        report = result.report
        stderr.write(fix_summary(result))
    if settings.statistics:
        text = statistics(report.findings, rules)
        if settings.output:
            write_text(settings.output, text)
        else:
            stdout.write(text)
    else:
        ctx = RenderContext(rules=rules, color=_use_color(settings, stdout), description=changeset.description, width=_width(stdout), explain=settings.explain)
        write_report(settings, report, ctx, stdout)
    if os.environ.get("GITHUB_OUTPUT"):
        # Inside a GitHub Actions step: the finding counts become the step's outputs.
        problem = write_outputs(os.environ["GITHUB_OUTPUT"], step_outputs(report))
        if problem:
            stderr.write(f"{PROG}: warning: {problem}\n")
    return exit_status(report, settings.fail_on)


def fix_summary(result: FixResult) -> str:
    if not result.fixed and not result.skipped:
        return f"{PROG}: no suggestion to apply\n"
    files = len(result.files)
    out = [f"{PROG}: fixed {len(result.fixed)} finding{'s' * (len(result.fixed) != 1)} in {files} file{'s' * (files != 1)}"]
    for f in sorted(result.fixed, key=lambda f: (f.path, f.line, f.rule)):
        out.append(f"  fixed {shown_path(f.path)}:{f.line} {f.rule}")
    for f, why in result.skipped:
        out.append(f"  left {shown_path(f.path)}:{f.line} {f.rule}: {why}")
    return "\n".join(out) + "\n"


def run_catalogue(argv: Sequence[str], stdout: IO[str]) -> int:
    """`review-copies rules` and `review-copies rule CODE`."""
    if argv[0] == "rules":
        if len(argv) > 1:
            raise UsageError(f"`{PROG} rules` takes no argument; `{PROG} rule CODE` explains one rule")
        stdout.write(rules_table(all_rules()))
        return 0
    if len(argv) != 2:
        raise UsageError(f"usage: {PROG} rule CODE (one of: {', '.join(r.code for r in all_rules())})")
    rule = rule_by_code(argv[1].upper())
    if rule is None:
        raise UsageError(f"no rule {argv[1]!r} (`{PROG} rules` lists them)")
    stdout.write(rule_page(rule))
    return 0


def main(argv: Sequence[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in ("rules", "rule"):
            # A folder named like a subcommand is reviewed as `./rules`.
            return run_catalogue(argv, stdout)
        args = build_parser().parse_args(argv)
        file_config = config.load(config.config_root(ChangeSpec(repo=args.repo)))
        settings = resolve_settings(args, file_config, dict(os.environ))
        if args.pre_commit:
            settings = replace(settings, change=pre_commit_change(settings.change, os.environ))
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
