"""Call sites of a reviewed function, read as text across the repository: which calls
reach it, and what each argument becomes for the probe (no torch, no code run here)."""

from __future__ import annotations

import textwrap

from review_copies.sandbox.verify.callers import Callers, CallSite
from tests.conftest import Repo

LIB = """
import torch
from torch import nn


class Scaler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        x.mul_(2)
        return self.fc(x)


def train_step(model, batch, opt, steps=1):
    x, y = batch
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
"""


class _Files:
    """Repository files from a dict (the git-backed ones are tested through the CLI)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = {p: textwrap.dedent(t).lstrip("\n") for p, t in files.items()}

    def mentioning(self, word: str) -> list[str]:
        return sorted(p for p, t in self.files.items() if word in t)

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def blob(self, path: str) -> str | None:
        return None


def _sites(files: dict[str, str], qualname: tuple[str, ...]) -> list[CallSite]:
    repo = _Files(files)
    return Callers(repo).sites("pkg/lib.py", repo.files["pkg/lib.py"], qualname)


def test_a_script_that_imports_the_function_gives_each_argument() -> None:
    sites = _sites({
        "pkg/lib.py": LIB,
        "scripts/train.py": """
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            from pkg.lib import Scaler, train_step as step

            def main():
                model = Scaler(16)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                loader = DataLoader(TensorDataset(torch.randn(64, 16), torch.randn(64, 16)), batch_size=8)
                for batch in loader:
                    step(model, batch, opt, steps=2)
        """,
    }, ("train_step",))
    assert [s.site for s in sites] == ["scripts/train.py:10"]
    args = sites[0].args
    assert args["model"]["spec"] == {"k": "call", "fn": "file:Scaler", "args": [{"k": "const", "v": 16}], "kwargs": {}}
    assert args["model"]["role"] == "model"
    # The optimizer is built over the very model passed next to it.
    opt = args["opt"]["spec"]
    assert opt["fn"] == "torch.optim.SGD" and opt["args"][0] == {"k": "method", "name": "parameters", "on": {"k": "same_as", "param": "model"}, "args": [], "kwargs": {}}
    assert args["opt"]["role"] == "optimizer"
    # A loop's element: the first batch of the loader.
    assert args["batch"]["spec"]["k"] == "item" and args["batch"]["spec"]["of"]["fn"] == "torch.utils.data.DataLoader"
    assert args["steps"]["spec"] == {"k": "const", "v": 2}
    assert sites[0].uses == ("Scaler",)
    assert args["batch"]["text"] == "batch"


def test_a_method_call_gives_the_constructor_arguments_too() -> None:
    sites = _sites({
        "pkg/lib.py": LIB,
        "tests/test_lib.py": """
            import torch
            from pkg import lib

            def test_forward():
                layer = lib.Scaler(4)
                x = torch.randn(3, 4, requires_grad=True)
                layer(x)
        """,
    }, ("Scaler", "forward"))
    assert [s.site for s in sites] == ["tests/test_lib.py:7"]
    assert sites[0].init == {"dim": {"text": "4", "spec": {"k": "const", "v": 4}, "role": "value"}}
    spec = sites[0].args["x"]["spec"]
    assert spec == {"k": "call", "fn": "torch.randn", "args": [{"k": "const", "v": 3}, {"k": "const", "v": 4}], "kwargs": {"requires_grad": {"k": "const", "v": True}}}


def test_unknown_values_stay_unknown_and_other_modules_functions_are_not_callers() -> None:
    sites = _sites({
        "pkg/lib.py": LIB,
        "a.py": """
            import torch
            from pkg.lib import train_step
            from data import load_model

            model = load_model("ckpt.pt")
            batch = (torch.zeros(2, 16).cuda(), torch.zeros(2, 16))
            train_step(model, batch, torch.load("opt.pt"))
        """,
        # Same name, another module: not a call of the reviewed function.
        "b.py": """
            from other import train_step
            train_step(1, 2, 3)
        """,
    }, ("train_step",))
    assert [s.site for s in sites] == ["a.py:7"]
    args = sites[0].args
    assert set(args) == {"batch"}
    # `.cuda()` means "on the probe's device".
    assert args["batch"]["spec"]["items"][0] == {"k": "to_device", "on": {"k": "call", "fn": "torch.zeros", "args": [{"k": "const", "v": 2}, {"k": "const", "v": 16}], "kwargs": {}}}


def test_relative_imports_and_the_same_files_main_block_are_callers() -> None:
    lib = LIB + textwrap.dedent("""

        if __name__ == "__main__":
            net = Scaler(8)
            net(torch.ones(2, 8))
    """)
    sites = _sites({
        "pkg/lib.py": lib,
        "pkg/run.py": """
            import torch
            from .lib import Scaler

            Scaler(2)(torch.zeros(5, 2))
        """,
    }, ("Scaler", "forward"))
    assert sorted(s.site for s in sites) == ["pkg/lib.py:25", "pkg/run.py:4"]
    # The reviewed file's own callers come first when they say as much.
    assert sites[0].site == "pkg/lib.py:25"


def test_callers_come_from_the_head_of_a_real_repository(repo: Repo) -> None:
    from review_copies.source.tree import RevisionFiles

    repo.write("pkg/__init__.py", "")
    repo.write("pkg/lib.py", LIB)
    repo.write("train.py", """
        import torch
        from pkg.lib import Scaler
        Scaler(3)(torch.randn(2, 3))
    """)
    head = repo.commit("add")
    repo.write("train.py", "")
    repo.commit("empty the script")  # the head of the review is the earlier commit
    files = RevisionFiles(repo.git.git_dir, head)
    sites = Callers(files).sites("pkg/lib.py", files.read("pkg/lib.py") or "", ("Scaler", "forward"))
    assert [s.site for s in sites] == ["train.py:3"]
