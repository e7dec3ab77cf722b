"""Every way of saying what to review (contract §1), on real git repositories."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Repo, run_cli, run_process, run_process_measured

BASE = """\
import torch


def keep(x: torch.Tensor):
    return x * 2
"""
BUGGY = """\
import torch


def keep(x: torch.Tensor):
    y = torch.tensor(x)
    return y * 2
"""
OFF = ("--offline", "--no-sandbox", "--format", "json")


def _lines(result) -> list[tuple[str, int, str]]:
    return [(f["path"], f["line"], f["category"]) for f in result.json["findings"]]


def test_acceptance_new_finding_on_changed_line_only(repo: Repo) -> None:
    repo.write("pkg/model.py", BASE)
    repo.commit("base")
    repo.write("pkg/model.py", BUGGY)
    repo.commit("add torch.tensor(x)")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", *OFF)
    assert result.code == 1, result.err
    findings = result.json["findings"]
    assert len(findings) == 1
    f = findings[0]
    assert (f["path"], f["line"], f["end_line"], f["category"], f["source"]) == ("pkg/model.py", 5, 5, "copy-construct", "static")
    assert f["suggestion"] == {"start_line": 5, "end_line": 5, "replacement": "    y = x.detach().clone()\n"}
    assert f["verification"]["status"] == "not-run"


def test_unchanged_line_is_not_reported_but_is_with_all(repo: Repo) -> None:
    repo.write("m.py", BUGGY)
    repo.commit("base")
    repo.write("m.py", BUGGY + "\n\ndef other():\n    return 1\n")
    repo.commit("unrelated change")
    args = ("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", *OFF)
    assert run_cli(*args).json["findings"] == []
    assert _lines(run_cli(*args, "--all")) == [("m.py", 5, "copy-construct")]


def test_working_tree_staged_unstaged_and_untracked(repo: Repo) -> None:
    repo.write("a.py", BASE)
    repo.write("b.py", BASE)
    repo.write(".gitignore", "ignored.py\n")
    repo.commit("base")
    repo.write("a.py", BUGGY)  # unstaged
    repo.write("b.py", BUGGY)
    repo.git.git.add("b.py")  # staged
    repo.write("c.py", BUGGY)  # untracked, not ignored
    repo.write("ignored.py", BUGGY)  # ignored: not reviewed
    before = repo.snapshot()
    result = run_cli("--repo", str(repo.path), *OFF)
    assert sorted(_lines(result)) == [("a.py", 5, "copy-construct"), ("b.py", 5, "copy-construct"), ("c.py", 5, "copy-construct")]
    assert repo.snapshot() == before


def test_default_repo_is_the_one_around_the_current_folder(repo: Repo) -> None:
    repo.write("sub/a.py", BASE)
    repo.commit("base")
    repo.write("sub/a.py", BUGGY)
    result = run_cli(*OFF, cwd=repo.path / "sub")
    assert _lines(result) == [("sub/a.py", 5, "copy-construct")]


def test_base_uses_the_merge_base_not_the_moving_branch(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.git.git.checkout("-b", "feature")
    repo.write("feature.py", BUGGY)
    repo.commit("feature adds a bug")
    repo.git.git.checkout("main")
    repo.write("main_only.py", BUGGY)  # lands on main after the branch point: not the PR's change
    repo.commit("main moves on")
    result = run_cli("--repo", str(repo.path), "--base", "main", "--head", "feature", *OFF)
    assert _lines(result) == [("feature.py", 5, "copy-construct")]


def test_merge_commit_as_base(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.git.git.checkout("-b", "side")
    repo.write("side.py", BASE)
    repo.commit("side")
    repo.git.git.checkout("main")
    repo.write("other.py", BASE)
    repo.commit("other")
    repo.git.git.merge("side", "--no-ff", "-m", "merge side")
    merge = repo.git.head.commit.hexsha
    repo.git.git.checkout("-b", "work")
    repo.write("new.py", BUGGY)
    repo.commit("work")
    result = run_cli("--repo", str(repo.path), "--base", merge, "--head", "work", *OFF)
    assert _lines(result) == [("new.py", 5, "copy-construct")]


def test_head_alone_reviews_that_commit(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("m.py", BUGGY)
    repo.commit("bug")
    repo.write("m.py", BASE)
    repo.commit("revert")
    result = run_cli("--repo", str(repo.path), "--head", "HEAD~1", *OFF)
    assert _lines(result) == [("m.py", 5, "copy-construct")]


def test_repository_with_no_commits(repo: Repo) -> None:
    repo.write("staged.py", BUGGY)
    repo.git.git.add("staged.py")
    repo.write("untracked.py", BUGGY)
    result = run_cli("--repo", str(repo.path), *OFF)
    assert sorted(_lines(result)) == [("staged.py", 5, "copy-construct"), ("untracked.py", 5, "copy-construct")]
    bad = run_cli("--repo", str(repo.path), "--base", "HEAD", *OFF)
    assert bad.code == 2 and "unknown revision" in bad.err


def test_path_filters(repo: Repo) -> None:
    repo.write("keep/a.py", BASE)
    repo.write("skip/b.py", BASE)
    repo.commit("base")
    repo.write("keep/a.py", BUGGY)
    repo.write("skip/b.py", BUGGY)
    result = run_cli(str(repo.path / "keep"), "--repo", str(repo.path), *OFF, cwd=repo.path)
    assert _lines(result) == [("keep/a.py", 5, "copy-construct")]
    single = run_cli("skip/b.py", *OFF, cwd=repo.path)
    assert _lines(single) == [("skip/b.py", 5, "copy-construct")]


def test_added_deleted_renamed_copied_and_mode_only(repo: Repo) -> None:
    body = BASE + "".join(f"\n\ndef f{i}(x: torch.Tensor):\n    return x + {i}\n" for i in range(12))
    repo.write("old_name.py", body)
    repo.write("gone.py", "import torch\n\nGONE = torch.zeros(3)\n")
    repo.write("script.py", BASE)
    repo.commit("base")
    (repo.path / "old_name.py").rename(repo.path / "new_name.py")
    repo.write("new_name.py", body.replace("return x + 3", "return torch.tensor(x)"))
    (repo.path / "gone.py").unlink()
    (repo.path / "script.py").chmod(0o755)
    repo.write("copy_of.py", body)  # a copy git detects with -C
    repo.write("added.py", BUGGY)
    repo.commit("restructure")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", *OFF)
    lines = sorted(_lines(result))
    renamed_line = body.replace("return x + 3", "return torch.tensor(x)").splitlines().index("    return torch.tensor(x)") + 1
    assert lines == [("added.py", 5, "copy-construct"), ("new_name.py", renamed_line, "copy-construct")]
    skipped = result.json["stats"]["skipped_files"]
    assert skipped.get("deleted") == 1
    assert skipped.get("no-added-lines", 0) >= 2  # the mode-only change and the unchanged copy


def test_binary_and_non_python_files_are_skipped_and_counted(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("weights.pt", b"\x00\x01\x02torch\x00" * 50)
    repo.write("notes.md", "torch.tensor(x) is bad\n")
    repo.write("blob.py", b"import torch\x00\x00\xff\xfe")
    repo.write("m.py", BUGGY)
    result = run_cli("--repo", str(repo.path), *OFF)
    assert _lines(result) == [("m.py", 5, "copy-construct")]
    stats = result.json["stats"]
    assert stats["skipped_files"]["not-python"] == 2
    assert stats["skipped_files"]["binary"] == 1
    assert stats["files"] == 4


def test_non_utf8_file_is_a_note_and_the_rest_goes_on(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("latin.py", "import torch\n# caf\xe9\n".encode("latin-1"))
    declared = "# -*- coding: latin-1 -*-\nimport torch\n\n\ndef f(x: torch.Tensor):\n    s = 'caf\xe9'\n    return torch.tensor(x)\n"
    repo.write("declared.py", declared.encode("latin-1"))
    repo.write("m.py", BUGGY)
    result = run_cli("--repo", str(repo.path), *OFF)
    assert sorted(_lines(result)) == [("declared.py", 7, "copy-construct"), ("m.py", 5, "copy-construct")]
    notes = result.json["notes"]
    assert [n["path"] for n in notes] == ["latin.py"] and "not valid utf-8" in notes[0]["message"]


def test_crlf_and_missing_final_newline_keep_exact_lines(repo: Repo) -> None:
    repo.write("crlf.py", BASE.replace("\n", "\r\n"), dedent=False)
    repo.commit("base")
    repo.write("crlf.py", BUGGY.replace("\n", "\r\n").rstrip("\r\n"), dedent=False)
    result = run_cli("--repo", str(repo.path), *OFF)
    f = result.json["findings"]
    assert [(x["path"], x["line"]) for x in f] == [("crlf.py", 5)]
    assert f[0]["suggestion"]["replacement"] == "    y = x.detach().clone()\r\n"


def test_file_that_does_not_parse_is_noted_once(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("broken.py", "import torch\ndef f(:\n    torch.tensor(x)\n")
    repo.write("m.py", BUGGY)
    result = run_cli("--repo", str(repo.path), *OFF)
    assert _lines(result) == [("m.py", 5, "copy-construct")]
    assert [n["path"] for n in result.json["notes"]] == ["broken.py"]
    assert "does not parse" in result.json["notes"][0]["message"]


def test_files_that_never_mention_torch_are_not_parsed(repo: Repo) -> None:
    repo.write("plain.py", "def f(:\n")  # would not parse, but is never parsed
    result = run_cli("--repo", str(repo.path), *OFF)
    assert result.json["notes"] == []
    assert result.json["stats"]["python_files_without_torch"] == 1


def test_diff_from_file_and_stdin(repo: Repo, tmp_path: Path) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("m.py", BUGGY)
    diff = repo.git.git.diff("HEAD", stdout_as_string=False) + b"\n"
    patch = tmp_path / "change.diff"
    patch.write_bytes(diff)
    from_file = run_cli("--diff", str(patch), *OFF, cwd=repo.path)
    assert _lines(from_file) == [("m.py", 5, "copy-construct")]
    from_stdin = run_process("--diff", "-", *OFF, cwd=repo.path, stdin=diff)
    assert from_stdin.code == 1, from_stdin.err
    assert _lines(from_stdin) == [("m.py", 5, "copy-construct")]


def test_diff_applies_to_the_old_version_in_the_working_tree(repo: Repo, tmp_path: Path) -> None:
    repo.write("m.py", BASE)
    repo.commit("base")
    repo.write("m.py", BUGGY)
    diff = repo.git.git.diff("HEAD", stdout_as_string=False) + b"\n"
    repo.git.git.checkout("--", "m.py")  # the tree holds the old version: the diff is applied in memory
    (tmp_path / "p.diff").write_bytes(diff)
    before = repo.snapshot()
    result = run_cli("--diff", str(tmp_path / "p.diff"), *OFF, cwd=repo.path)
    assert _lines(result) == [("m.py", 5, "copy-construct")]
    assert repo.snapshot() == before


def test_plain_diff_u_outside_any_repository(tmp_path: Path) -> None:
    patch = tmp_path / "new.diff"
    body = "".join(f"+{line}\n" for line in BUGGY.splitlines())
    patch.write_text(f"--- /dev/null\t2026-01-01 00:00:00\n+++ b/new_file.py\t2026-01-01 00:00:00\n@@ -0,0 +1,{len(BUGGY.splitlines())} @@\n{body}")
    result = run_cli("--diff", str(patch), *OFF, cwd=tmp_path)
    assert _lines(result) == [("new_file.py", 5, "copy-construct")]


def test_all_over_a_folder_that_is_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.py").write_text(BUGGY)
    (tmp_path / "lib" / "readme.txt").write_text("torch")
    result = run_cli("--all", "lib", *OFF, cwd=tmp_path)
    assert _lines(result) == [("lib/m.py", 5, "copy-construct")]


def test_ten_thousand_file_change_streams(repo: Repo) -> None:
    """A 10,000-file change: files are read one at a time, and the result is exact."""
    repo.write("seed.py", BASE)
    repo.commit("base")
    for i in range(10_000):
        repo.write(f"gen/d{i // 500}/f{i}.py", f"X = {i}\n", dedent=False)
    repo.write("gen/bug.py", BUGGY)
    repo.commit("big change")
    result, peak_mib = run_process_measured("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", *OFF)
    assert result.code == 1, result.err
    assert peak_mib < 200, f"peak memory {peak_mib:.0f} MiB: the change was not streamed"
    report = result.json
    assert report["stats"]["files"] == 10_001
    assert _lines(type("R", (), {"json": report})()) == [("gen/bug.py", 5, "copy-construct")]
