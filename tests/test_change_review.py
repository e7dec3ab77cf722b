"""A change is reviewed as a change: the base version of every changed file is read (from
git, or from a diff), each changed function is compared with its earlier self, and what
the change dropped or made in place is evidence the rules use and the messages say. The
repository index answers questions about classes defined in other files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from review_copies.analysis.change import compare
from review_copies.analysis.parse import parse
from review_copies.index.facts import file_facts
from review_copies.index.repo import RepoIndex
from tests.conftest import Repo, run_cli

BEFORE = """
import copy
import torch


def snapshot(model, history, loss):
    best = copy.deepcopy(model.state_dict())
    history.append(loss.detach())
    return best


def normalize(img, mean, std):
    img = (img - mean) / std
    return img
"""

AFTER = """
import copy
import torch


def snapshot(model, history, loss):
    best = model.state_dict()
    history.append(loss)
    return best


def normalize(img, mean, std):
    img.sub_(mean).div_(std)
    return img
"""


def _dedent(text: str) -> str:
    return text.lstrip("\n")


def test_the_comparison_names_what_each_function_lost() -> None:
    after, before = parse("m.py", _dedent(AFTER)), parse("m.py", _dedent(BEFORE))
    changes = compare(after, before, frozenset({6, 7, 12}))
    snap = changes["snapshot"]
    assert [(d.line, d.what) for d in snap.dropped] == [(6, "copy.deepcopy(...)"), (7, ".detach()")]
    assert snap.dropped[1].before == "history.append(loss.detach())"
    assert changes["normalize"].base_writes == frozenset() and not changes["normalize"].new


def test_a_new_function_has_no_base_and_an_unchanged_one_is_not_compared() -> None:
    after = parse("m.py", _dedent(AFTER) + "\n\ndef fresh(x):\n    return x.clone()\n")
    changes = compare(after, parse("m.py", _dedent(BEFORE)), frozenset({17}))
    assert set(changes) == {"fresh"} and changes["fresh"].new


def _pr(repo: Repo) -> dict:
    repo.write("pkg/model_utils.py", BEFORE)
    repo.commit("base")
    repo.write("pkg/model_utils.py", AFTER)
    repo.commit("the change")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json")
    assert result.code == 1, result.err
    return {(f["line"], f["rule"]): f for f in result.json["findings"]}


def test_a_pull_request_that_drops_protections_is_told_what_it_dropped(repo: Repo) -> None:
    found = _pr(repo)
    assert set(found) == {(6, "RC157"), (7, "RC261"), (12, "RC112")}, sorted(found)
    assert found[(6, "RC157")]["message"].startswith("This change drops the `copy.deepcopy(...)` from `best = copy.deepcopy(model.state_dict())`")
    assert found[(7, "RC261")]["message"].startswith("This change drops the `.detach()` from `history.append(loss.detach())`")
    assert found[(7, "RC261")]["suggestion"]["replacement"] == "    history.append(loss.detach())\n"
    assert "write into its argument `img`" in found[(12, "RC112")]["message"]


def test_the_same_change_as_a_diff_file_is_read_against_its_base(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/model_utils.py", BEFORE)
    repo.commit("base")
    repo.write("pkg/model_utils.py", AFTER)  # the working tree holds the new version
    diff = subprocess.run(["git", "-C", str(repo.path), "diff"], capture_output=True, text=True, check=True).stdout
    (tmp_path / "change.diff").write_text(diff)
    result = run_cli("--repo", str(repo.path), "--diff", str(tmp_path / "change.diff"), "--offline", "--no-sandbox", "--format", "json")
    assert sorted((f["line"], f["rule"]) for f in result.json["findings"]) == [(6, "RC157"), (7, "RC261"), (12, "RC112")]


def test_whole_files_have_no_base_and_stay_quiet_on_what_only_the_change_shows(repo: Repo) -> None:
    repo.write("pkg/model_utils.py", AFTER)
    repo.commit("only the new version")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json")
    assert not any(f["rule"] in ("RC261", "RC112", "RC157") for f in result.json["findings"])


METER = """
class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
"""

TRAIN = """
import torch
from utils.meters import AverageMeter


def train_epoch(model, loader, optimizer):
    losses = AverageMeter()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss, x.size(0))
    return losses.sum
"""


def test_the_index_knows_a_class_defined_in_another_file(repo: Repo, tmp_path: Path) -> None:
    repo.write("utils/__init__.py", "")
    repo.write("utils/meters.py", METER)
    repo.commit("meters")
    repo.write("train.py", TRAIN)
    repo.commit("training loop")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    [finding] = result.json["findings"]
    assert finding["rule"] == "RC254" and finding["line"] == 12
    assert "`AverageMeter.update`, which accumulates it into `self.sum` (utils/meters.py:6)" in finding["message"]
    # The facts of each file are cached by content: a second review reads them back.
    cached = list((tmp_path / "cache" / "review-copies" / "index").rglob("*.json"))
    assert cached
    again = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert again.json["findings"] == result.json["findings"]


def test_a_class_defined_twice_must_keep_in_both_to_count() -> None:
    class Files:
        def __init__(self) -> None:
            self.texts = {"a.py": _dedent(METER), "b.py": "class AverageMeter:\n    def update(self, val, n=1):\n        print(val)\n"}

        def mentioning(self, word: str) -> list[str]:
            return sorted(p for p, t in self.texts.items() if word in t)

        def read(self, path: str) -> str | None:
            return self.texts.get(path)

    assert RepoIndex(Files()).keeps("AverageMeter", "update", 0, None) is None
    assert file_facts(_dedent(METER))["classes"]["AverageMeter"]["methods"]["update"]["keeps"] == {"val": ["sum", 6, "accumulates"], "n": ["sum", 6, "accumulates"]}
