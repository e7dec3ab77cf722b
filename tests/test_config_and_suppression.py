"""`[tool.review-copies]` configuration and `# review-copies: ignore` comments."""

from __future__ import annotations

from tests.conftest import Repo, run_cli

TWO = """\
import torch


def f(x: torch.Tensor):
    y = torch.tensor(x){c1}
    w = torch.randn(3, requires_grad=True)
    return y, (w * 2).numpy(){c2}
"""
OFF = ("--offline", "--no-sandbox", "--format", "json")


def _rules(repo: Repo, *extra: str) -> list[str]:
    return [f["rule"] for f in run_cli("--repo", str(repo.path), *OFF, *extra).json["findings"]]


def _change(repo: Repo, c1: str = "", c2: str = "", config: str | None = None) -> None:
    repo.write("m.py", "import torch\n")
    if config is not None:
        repo.write("pyproject.toml", config)
    repo.commit()
    repo.write("m.py", TWO.format(c1=c1, c2=c2))


def test_ignore_comment_silences_every_finding_on_its_line(repo: Repo) -> None:
    _change(repo, c1="  # review-copies: ignore")
    assert _rules(repo) == ["RC321"]


def test_ignore_comment_with_names(repo: Repo) -> None:
    _change(repo, c1="  # review-copies: ignore[numpy-bridge]", c2="  # review-copies: ignore[RC321, copy-construct]")
    assert _rules(repo) == ["RC301"]


def test_ignore_inside_a_string_does_not_count(repo: Repo) -> None:
    repo.write("m.py", "import torch\n")
    repo.commit()
    repo.write("m.py", 'import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.tensor(x), "# review-copies: ignore"\n')
    assert _rules(repo) == ["RC301"]


def test_config_select_ignore_and_fail_on(repo: Repo) -> None:
    _change(repo, config="[tool.review-copies]\nignore = ['numpy-bridge']\nfail-on = 'error'\n")
    result = run_cli("--repo", str(repo.path), *OFF)
    assert [f["rule"] for f in result.json["findings"]] == ["RC301"]
    assert result.code == 0  # fail-on error, only a warning left
    assert run_cli("--repo", str(repo.path), *OFF, "--fail-on", "warning").code == 1  # flags override


def test_config_select_by_code_prefix(repo: Repo) -> None:
    _change(repo, config="[tool.review-copies]\nselect = ['RC32']\n")
    assert _rules(repo) == ["RC321"]


def test_config_exclude_globs(repo: Repo) -> None:
    _change(repo, config="[tool.review-copies]\nexclude = ['m.py']\n")
    result = run_cli("--repo", str(repo.path), *OFF).json
    assert result["findings"] == [] and result["stats"]["skipped_files"]["excluded"] == 1


def test_config_sandbox_and_device_keys_are_read(repo: Repo) -> None:
    _change(repo, config="[tool.review-copies]\nsandbox = false\ndevice = 'cpu'\n")
    result = run_cli("--repo", str(repo.path), "--offline", "--format", "json").json
    assert {f["verification"]["status"] for f in result["findings"]} == {"not-run"}
