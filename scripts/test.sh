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
step "ruff"
ruff check python bench kernels tests
step "pytest (CPU)"
pytest -q -m "not gpu" python/tests tests kernels
