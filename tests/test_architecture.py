"""The house rules of the code base, checked: imports point down (import-linter, on an
installed copy), no module imports itself back through others, modules and classes stay
readable, one rule per file, and the registries are the lists users see."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
from pathlib import Path

import review_copies
from review_copies import output
from review_copies.rules import all_rules
from review_copies.sandbox import recipes

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "reviewer", ROOT / "sandbox"]
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300


def test_imports_point_down_and_never_cycle() -> None:
    done = subprocess.run([str(ROOT / "tools" / "lint_imports.sh")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "0 import cycles" in done.stdout


def test_no_module_over_600_lines_and_no_class_over_300() -> None:
    too_long = []
    for folder in SOURCES:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") > MAX_MODULE_LINES:
                too_long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}: class {node.name} of {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, too_long


def test_each_rule_file_holds_one_rule_whose_code_names_the_file() -> None:
    by_module = {rule.__module__: rule for rule in all_rules()}
    assert len(by_module) == len(all_rules()), "two rules share a module"
    for module_name, rule in by_module.items():
        stem = module_name.rsplit(".", 1)[-1]
        assert stem == f"{rule.code.lower()}_{rule.name.replace('-', '_')}", (stem, rule.code, rule.name)
        assert module_name.split(".")[-2] == rule.category.value.replace("-", "_"), f"{rule.code} is filed under the wrong category"


def test_every_module_of_the_rules_package_is_a_rule_a_helper_or_the_framework() -> None:
    rules_dir = ROOT / "reviewer" / "rules"
    for path in rules_dir.rglob("*.py"):
        if path.name in ("__init__.py", "base.py", "_common.py", "helpers.py"):
            continue
        assert path.name.startswith("rc"), f"{path.relative_to(ROOT)} is neither a rule nor a helper module"


def test_the_format_registry_is_what_the_command_line_offers() -> None:
    declared = set()
    for info in pkgutil.iter_modules(output.__path__):
        module = importlib.import_module(f"review_copies.output.{info.name}")
        if hasattr(module, "NAME"):
            declared.add(module.NAME)
            assert callable(module.render), info.name
    assert set(output.names()) == declared == {"text", "json", "sarif", "markdown", "github"}
    assert output.names()[0] == "text"


def test_every_recipe_lives_in_its_own_module_and_every_category_has_recipes() -> None:
    registry = recipes.registry()
    assert {type(r).__module__.rsplit(".", 1)[-1].replace("_", "-") for r in registry.values()} == set(registry)
    assert set(recipes.CATEGORY_RECIPES) == {c.category.value for c in all_rules()}


def test_one_top_level_package_is_installed() -> None:
    dist = ROOT / "setup.py"
    assert "review_copies" in dist.read_text()
    assert review_copies.__name__ == "review_copies"
    for name in ("reviewer", "sandbox", "prompts"):
        assert (ROOT / name).is_dir(), f"the repository keeps {name}/ at its top"


def test_the_readme_documents_every_llm_option_with_its_default() -> None:
    from review_copies.model.settings import LLM_OPTIONS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `llm-") or line.startswith("| `price-")]
    for option in LLM_OPTIONS:
        row = next((r for r in rows if f"`{option.key}`" in r), None)
        assert row is not None, f"{option.key} is not in the README's table"
        if isinstance(option.default, (int, float)) and not isinstance(option.default, bool):
            assert f"| {option.default:g} |" in row.replace(".0 |", " |") or f"| {option.default} |" in row, (option.key, row)
