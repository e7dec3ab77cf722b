#!/usr/bin/env bash
# The import rules of pyproject.toml ([tool.importlinter]), checked on an installed copy:
# the package is assembled from reviewer/, sandbox/ and prompts/, and import-linter reads
# a package from the folder it is installed in. Built from a copy of the sources, so no
# build folder is left in the checkout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp -r "$root/reviewer" "$root/sandbox" "$root/prompts" "$root/setup.py" "$root/pyproject.toml" "$root/README.md" "$tmp/src/"
python -m pip install -q --no-deps --no-build-isolation --target "$tmp/site" "$tmp/src" 2>&1 | grep -v '^WARNING' || true
cd "$tmp" && PYTHONPATH="$tmp/site" lint-imports "$root/pyproject.toml"
PYTHONPATH="$tmp/site" python "$root/tools/import_cycles.py"
