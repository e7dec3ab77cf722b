"""Import resolution, tensor hunks and their context, determinism, the diff parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from review_copies.analysis.parse import parse
from review_copies.review.engine import FileJob, review_file
from review_copies.source.diff import MalformedDiff, iter_file_diffs, unquote_path
from tests.conftest import ROOT, Repo


def _findings(source: str) -> list[tuple[int, str]]:
    text = textwrap.dedent(source).lstrip("\n")
    result = review_file(FileJob("m.py", text, None, ("RC301", "RC302", "RC321")))
    return [(f.line, f.rule) for f in result.findings]


@pytest.mark.parametrize(
    "source",
    [
        """
        import torch as T
        def f(x: T.Tensor):
            return T.tensor(x)
        """,
        """
        from torch import tensor, Tensor
        def f(x: Tensor):
            return tensor(x)
        """,
        """
        def f():
            import torch
            x = torch.ones(2)
            return torch.tensor(x)
        """,
        """
        from torch import tensor as make
        import torch
        def f():
            x = torch.ones(2)
            return make(x)
        """,
    ],
)
def test_torch_imports_are_resolved(source: str) -> None:
    assert [rule for _, rule in _findings(source)] == ["RC301"]


def test_a_local_function_named_tensor_is_not_torch() -> None:
    assert _findings(
        """
        import torch
        def tensor(x):
            return x
        def f():
            x = torch.ones(2)
            return tensor(x)
        """
    ) == []


def test_imports_of_functional_and_numpy_are_mapped() -> None:
    parsed = parse("m.py", "import numpy as np\nfrom torch.nn import functional as F\nfrom torch import nn\n")
    assert parsed.imports.lookup("F") == ("torch.nn.functional",)
    assert parsed.imports.lookup("np") == ("numpy",)
    assert parsed.imports.lookup("nn") == ("torch.nn",)
    assert parsed.imports.aliases_of("torch") == {"F", "nn"}


TRY_IMPORT = """\
try:
    from torch import tensor as mk
except ImportError:
    from mylib import mk
import torch


def f():
    x = torch.ones(2)
    return mk(x)
"""


def test_name_resolution_does_not_depend_on_hash_seed(repo: Repo) -> None:
    repo.write("m.py", TRY_IMPORT)
    outputs = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.run([sys.executable, "-m", "review_copies", "--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json"], capture_output=True, env=env, check=False)
        findings = json.loads(proc.stdout)["findings"]
        outputs.add(json.dumps(findings, sort_keys=True))
        assert [f["rule"] for f in findings] == ["RC301"]  # any matching qualified name counts
    assert len(outputs) == 1


SOURCE = """\
import torch
import numpy as np


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        y = self.fc(x)
        return y.relu()


def unrelated(a, b):
    return a + b
"""


def test_tensor_hunk_context() -> None:
    changed = frozenset({12, 16})  # one line in Net.forward, one in a function that handles no tensors
    result = review_file(FileJob("m.py", SOURCE, changed, ("RC301",)))
    assert len(result.hunks) == 1
    hunk = result.hunks[0]
    assert (hunk.scope_kind, hunk.scope_name, hunk.start, hunk.end, hunk.changed) == ("method", "Net.forward", 10, 12, (12,))
    assert hunk.imports == ((1, "import torch"), (2, "import numpy as np"))
    numbered = hunk.numbered().splitlines()
    assert numbered[0] == " 10|     def forward(self, x):"
    assert numbered[-1] == ">12|         return y.relu()"


def test_unidiff_line_numbers_and_markers() -> None:
    diff = (
        b"diff --git a/m.py b/m.py\nindex 1..2 100644\n--- a/m.py\n+++ b/m.py\n"
        b"@@ -1,3 +1,4 @@ def f():\n a\n-b\n+B\n+C\n c\n\\ No newline at end of file\n"
        b"@@ -10 +11,2 @@\n x\n+y\n"
        b'diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"\nnew file mode 100644\n--- /dev/null\n+++ "b/t\\303\\251st.py"\n@@ -0,0 +1 @@\n+z\n'
        b"diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
        b"diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\n"
        b"diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\nrename to new.py\n"
    )
    files = list(iter_file_diffs(diff.splitlines(keepends=True)))
    assert [(f.path, f.status, f.binary) for f in files] == [
        ("m.py", "modified", False),
        ("tést.py", "added", False),
        ("run.sh", "modified", False),
        ("img.png", "modified", True),
        ("new.py", "renamed", False),
    ]
    assert [h.added for h in files[0].hunks] == [(2, 3), (12,)]
    assert files[2].old_mode == "100644" and files[2].new_mode == "100755"
    assert files[4].old_path == "old.py"


def test_unquote_path() -> None:
    assert unquote_path(b'"a\\tb\\"c\\\\d\\303\\251"') == "a\tb\"c\\dé".encode()


def test_unidiff_rejects_counts_that_lie() -> None:
    with pytest.raises(MalformedDiff, match="longer than its header"):
        list(iter_file_diffs([b"--- a/x\n", b"+++ b/x\n", b"@@ -1 +1 @@\n", b"-a\n", b"-b\n"]))


def test_a_failing_analysis_costs_only_that_file(monkeypatch: pytest.MonkeyPatch) -> None:
    from review_copies.rules.copy_construct.rc301_copy_construct_from_tensor import CopyConstructFromTensor

    def broken(self, flow):  # a bug in one rule
        raise AttributeError("'NoneType' object has no attribute 'grad'")

    monkeypatch.setattr(CopyConstructFromTensor, "check", broken)
    result = review_file(FileJob("m.py", "import torch\nx = torch.tensor(torch.ones(2))\n", None, ("RC301",)))
    assert result.findings == []
    assert [n.path for n in result.notes] == ["m.py"] and "the analysis failed (AttributeError" in result.notes[0].message
