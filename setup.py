"""Packaging: the repository's folders, installed under one import package.

`reviewer/` is `review_copies`, `sandbox/` is `review_copies.sandbox` and `prompts/` is
`review_copies.prompts`, so installing the tool claims one top-level name in
site-packages. Subpackages are found by walking the folders: a new one needs no line here.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {"review_copies": "reviewer", "review_copies.sandbox": "sandbox", "review_copies.prompts": "prompts"}


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        for init in sorted(Path(folder).rglob("__init__.py")):
            parts = init.parent.relative_to(folder).parts
            found.append(".".join((name, *parts)))
    return found


setup(package_dir=ROOTS, packages=packages())
