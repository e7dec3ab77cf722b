"""action.yml, the example workflows, the pre-commit hooks and the docs that show them:
parsed and checked against each other and against the command line they drive."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import git
import pytest
import yaml

from review_copies.cli import build_parser
from review_copies.github.__main__ import build_parser as post_parser
from review_copies.github.runner_outputs import step_outputs
from review_copies.model.report import Report
from tests.github_fake import FakeGitHub
from tests.github_repo import REPOSITORY, make_pull_request, write_event

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "README.md"
INPUTS = {"openai-api-key", "model", "base-url", "fail-on", "device", "sandbox", "post-review", "python-version"}


def _yaml(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


@pytest.fixture(scope="module")
def action() -> dict:
    return _yaml(ROOT / "action.yml")


def _step(action: dict, step_id: str) -> dict:
    return next(s for s in action["runs"]["steps"] if s.get("id") == step_id)


def _fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def _steps(workflow: dict) -> list[dict]:
    return [s for job in workflow["jobs"].values() for s in job["steps"]]


# --------------------------------------------------------------------- action.yml


def test_the_action_has_the_inputs_and_a_composite_run(action: dict) -> None:
    assert set(action["inputs"]) >= INPUTS
    assert all(spec.get("description") for spec in action["inputs"].values())
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert step["shell"] == "bash"
            assert "${{" not in step["run"], "inputs reach scripts through env only (no script injection)"
    install = next(s for s in action["runs"]["steps"] if "pip" in s.get("run", ""))
    assert '"$GITHUB_ACTION_PATH"' in install["run"], "installs the package from the action's own path"
    assert "download.pytorch.org/whl/cpu" in install["run"]


def test_the_outputs_are_what_the_review_writes(action: dict) -> None:
    written = set(step_outputs(Report(), posted=0, review_url="https://x"))
    for name, spec in action["outputs"].items():
        assert spec["value"] == f"${{{{ steps.review.outputs.{name} }}}}"
        assert name in written, f"the review step never writes output {name}"


def test_the_run_step_is_the_command_the_docs_show(action: dict) -> None:
    run = _step(action, "review")["run"].strip()

    assert run in [block.strip() for block in _fenced(DOCS.read_text(), "bash")]


def _argv(run: str, env: dict[str, str]) -> list[str]:
    script = "review-copies() { printf '%s\\0' \"$@\"; }\n" + run
    out = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, check=True)
    return [a.decode() for a in out.stdout.split(b"\0")[:-1]]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RC_POST_REVIEW": "1"}, ["--post-review"]),
        ({"RC_BASE": "b" * 40, "RC_HEAD": "c" * 40}, ["--base", "b" * 40, "--head", "c" * 40, "--format", "github"]),
        (
            {"RC_POST_REVIEW": "1", "RC_FAIL_ON": "error", "RC_DEVICE": "cpu", "RC_NO_SANDBOX": "1", "RC_MODEL": "my model $(touch pwned)", "RC_BASE_URL": "http://llm:8000/v1"},
            ["--post-review", "--fail-on", "error", "--device", "cpu", "--no-sandbox", "--model", "my model $(touch pwned)", "--base-url", "http://llm:8000/v1"],
        ),
    ],
)
def test_inputs_become_exactly_these_flags(action: dict, tmp_path: Path, env: dict[str, str], expected: list[str]) -> None:
    run = _step(action, "review")["run"]
    argv = _argv(f"cd {shlex.quote(str(tmp_path))}\n{run}", env)

    assert argv == expected
    assert not (tmp_path / "pwned").exists()
    build_parser().parse_args(argv)  # flags of the real command line


@pytest.mark.parametrize("post", [True, False])
def test_the_run_step_reviews_the_pull_request(action: dict, httpserver, tmp_path: Path, post: bool) -> None:
    """The documented command itself, run by bash as the runner would, against the fake:
    a review with post-review, annotations without; the step outputs either way."""
    fake = FakeGitHub(httpserver)
    pr = make_pull_request(tmp_path)
    fake.set_diff(str(pr.path), pr.base, pr.head)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(write_event(tmp_path / "event.json", pr)),
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_API_URL": fake.api_url,
        "GITHUB_TOKEN": fake.token,
        "GITHUB_OUTPUT": str(tmp_path / "outputs"),
        "RC_FAIL_ON": "error",
        "RC_NO_SANDBOX": "1",
        **({"RC_POST_REVIEW": "1"} if post else {"RC_BASE": pr.base, "RC_HEAD": pr.head}),
    }
    done = subprocess.run(["bash", "-e", "-c", _step(action, "review")["run"]], cwd=pr.path, env=env, capture_output=True, text=True)

    assert done.returncode == 1, done.stderr
    assert len(fake.posted_reviews()) == (1 if post else 0)
    assert ("::error file=train.py,line=13" in done.stdout) is not post
    outputs = dict(line.split("=", 1) for line in (tmp_path / "outputs").read_text().splitlines())
    assert outputs["findings"] == "2" and outputs["errors"] == "1"


def test_every_action_env_is_used_by_the_run_step(action: dict) -> None:
    step = _step(action, "review")
    for name in step["env"]:
        if name.startswith("RC_"):
            assert f"${name}" in step["run"] or f"${{{name}:+" in step["run"], name


# ---------------------------------------------------------------- the workflows


def test_the_example_workflow_is_minimal_and_polite() -> None:
    path = ROOT / "examples" / "github-workflow.yml"
    wf = _yaml(path)
    assert set(wf["on"]) == {"pull_request"}
    assert wf["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert wf["concurrency"]["cancel-in-progress"] is True and "pull_request.number" in wf["concurrency"]["group"]
    job = wf["jobs"]["review"]
    assert "pull_request.draft" in job["if"] and "'Bot'" in job["if"]
    checkout, review = job["steps"]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0
    assert review["uses"].startswith("review-copies/review-copies@")
    assert set(review["with"]) <= set(_yaml(ROOT / "action.yml")["inputs"])
    shown = [textwrap.dedent(block) for block in re.findall(r"^   ```yaml\n(.*?)^   ```$", DOCS.read_text(), re.MULTILINE | re.DOTALL)]
    assert path.read_text() in shown, "the docs show the example verbatim"


def test_the_fork_safe_pair_never_mixes_pull_request_code_and_privileges() -> None:
    folder = ROOT / "examples" / "github-workflow-fork-safe"
    review, post = _yaml(folder / "review-copies-pr.yml"), _yaml(folder / "review-copies-post.yml")
    review_text, post_text = (folder / "review-copies-pr.yml").read_text(), (folder / "review-copies-post.yml").read_text()

    assert set(review["on"]) == {"pull_request"} and review["permissions"] == {"contents": "read"}
    assert "secrets." not in review_text
    assert "pull_request_target" not in review_text + post_text

    assert post["on"]["workflow_run"]["workflows"] == [review["name"]]
    assert post["permissions"]["pull-requests"] == "write"
    assert not any(s.get("uses", "").startswith("actions/checkout") for s in _steps(post)), "the privileged job checks nothing out"
    for step in _steps(review) + _steps(post):
        assert "${{" not in step.get("run", ""), "event fields reach scripts through env only"

    upload = next(s for s in _steps(review) if s.get("uses", "").startswith("actions/upload-artifact"))
    download = next(s for s in _steps(post) if s.get("uses", "").startswith("actions/download-artifact"))
    assert upload["with"]["name"] == download["with"]["name"]
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    command = next(s["run"] for s in _steps(post) if "post-report" in s.get("run", ""))
    argv = shlex.split(command.replace('"$ARTIFACT', '"/tmp/a'))
    assert argv[:3] == ["python", "-m", "review_copies.github"]
    args = post_parser().parse_args(argv[3:])
    writes = next(s["run"] for s in _steps(review) if "review-copies --base" in s.get("run", ""))
    assert Path(args.report).name in writes and Path(args.pull_request_file).name in writes


def test_the_sarif_workflow_uploads_what_it_writes() -> None:
    wf = _yaml(ROOT / "examples" / "github-sarif.yml")
    assert wf["permissions"]["security-events"] == "write"
    steps = _steps(wf)
    review = next(s for s in steps if "--format sarif" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    argv = shlex.split(review["run"])
    assert argv[argv.index("--output") + 1] == upload["with"]["sarif_file"]
    build_parser().parse_args(argv[1:])


# ----------------------------------------------------------------- pre-commit


def _console_script() -> str:
    script = Path(sys.executable).parent / "review-copies"
    return str(script) if script.exists() else "review-copies"


def test_the_pre_commit_hooks_review_the_staged_change_offline(tmp_path: Path) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"review-copies", "review-copies-isolated"}
    repo = git.Repo.init(tmp_path)
    with repo.config_writer() as cfg:
        cfg.set_value("user", "name", "A")
        cfg.set_value("user", "email", "a@example.com")
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x: torch.Tensor):\n    return x\n")
    repo.index.add(["m.py"])
    repo.index.commit("base")
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.tensor(x)\n")
    repo.index.add(["m.py"])
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}

    for hook in hooks:
        assert "--offline" in hook["entry"] and hook["types"] == ["python"]
        argv = [_console_script(), *shlex.split(hook["entry"])[1:], "--no-sandbox", "m.py"]
        staged = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert staged.returncode == 1 and "RC301" in staged.stdout, staged.stderr
        assert "OPENAI_API_KEY" not in staged.stderr, "--offline: not even a word about the model"


def test_zizmor_finds_nothing_in_the_action_and_the_example_workflows() -> None:
    """Every third-party action pinned by commit SHA, no injection, no secret-routing
    write to GITHUB_ENV/GITHUB_PATH: zizmor's offline audits, as a user's security scan would run them."""
    exe = Path(sys.executable).parent / "zizmor"
    if not exe.exists():
        pytest.skip("zizmor is not installed (pip install -e '.[test]')")
    files = [ROOT / "action.yml", *sorted((ROOT / "examples").rglob("*.yml"))]
    result = subprocess.run([str(exe), "--offline", "--no-progress", *map(str, files)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout + result.stderr


def _fake_bin(folder: Path, uid: str) -> Path:
    folder.mkdir()
    scripts = {
        "id": f"#!/bin/sh\necho {uid}\n",
        # Records how it was called, then runs the command as sudo would.
        "sudo": '#!/bin/sh\nprintf "%s\\n" "$@" > "$SUDO_LOG"\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n',
        "review-copies": '#!/bin/sh\nprintf "%s\\0" "$@"\n',
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize(("uid", "no_sandbox", "through_sudo"), [("1001", "", True), ("1001", "1", False), ("0", "", False)])
def test_on_a_hosted_runner_the_review_runs_as_root_through_sudo(action: dict, tmp_path: Path, uid: str, no_sandbox: str, through_sudo: bool) -> None:
    """GitHub's hosted runners give the job's user no namespaces but passwordless sudo:
    the review step runs review-copies through `sudo -n`, passing on the secrets and the
    Actions variables it needs, so that its sandbox can isolate the pull request's code.
    Not when the job is root already, nor when the sandbox is off."""
    step = _step(action, "review")
    folder = _fake_bin(tmp_path / "bin", uid)
    log = tmp_path / "sudo.log"
    env = {
        "PATH": f"{folder}:/usr/bin:/bin", "SUDO_LOG": str(log), "RC_PRESERVE": step["env"]["RC_PRESERVE"],
        "RC_BASE": "b" * 40, "RC_HEAD": "c" * 40, "RC_NO_SANDBOX": no_sandbox,
    }
    out = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, check=True)
    argv = [a.decode() for a in out.stdout.split(b"\0")[:-1]]
    assert argv[:4] == ["--base", "b" * 40, "--head", "c" * 40]
    assert log.exists() == through_sudo
    if through_sudo:
        used = log.read_text().splitlines()
        assert used[0] == "-n" and used[2] == str(folder / "review-copies") and used[3:5] == ["--base", "b" * 40]
        preserved = used[1].removeprefix("--preserve-env=").split(",")
        for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_OUTPUT", "GITHUB_ACTIONS"):
            assert name in preserved
