#!/usr/bin/env bash
# Every test of the project: style gates, Rust tests, Python tests (CPU), the CUDA and ROCm device-code checks and the
# end-to-end flow (build → hub → push → get_kernel → run). `.ci/run` calls this; it installs what it needs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
"$repo/scripts/setup.sh"
"$repo/scripts/install-rocm-tools.sh"
venv="${KFORGE_VENV:-$repo/.venv}"
export PATH="$venv/bin:$repo/target/debug:$PATH"
export KFORGE_BIN="$repo/target/debug/kforge"

step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
step "cargo test --workspace"
cargo test --quiet --workspace
py_trees=(python bench kernels tests scripts)
step "ruff"
ruff check "${py_trees[@]}"
ruff format --check "${py_trees[@]}"
step "pytest (CPU: loader, hub interop, kernels, CUDA and ROCm device code, end-to-end)"
pytest -q -m "not gpu" "${py_trees[@]}"
step "done"
