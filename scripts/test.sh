#!/usr/bin/env bash
# Every test of the project: style gates, Rust tests, Python tests (CPU). `.ci/run` calls this.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
"$repo/scripts/setup.sh"
venv="${KFORGE_VENV:-$repo/.venv}"
export PATH="$venv/bin:$repo/target/debug:$PATH"

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
step "cargo test --workspace"
cargo test --quiet --workspace
# Only the Python trees that exist: a fresh checkout grows them one by one.
py_trees=()
for d in python bench kernels tests; do [ -d "$d" ] && py_trees+=("$d"); done
step "ruff"
ruff check "${py_trees[@]}"
ruff format --check "${py_trees[@]}"
step "pytest (CPU)"
pytest -q -m "not gpu" "${py_trees[@]}"
