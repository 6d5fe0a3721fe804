#!/usr/bin/env bash
# Install what kforge's demo and tests need, idempotently: a Python venv with the pinned packages,
# the kforge loader (editable) and the kforge binary. Source it or run it; re-running is cheap.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KFORGE_VENV:-$repo/.venv}"

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install Rust (rustup) first" >&2
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating venv $venv"
    python3 -m venv "$venv"
fi
stamp="$venv/.kforge-requirements.sha256"
want="$({ cat "$repo/requirements-dev.txt"; cat "$repo/python/pyproject.toml" 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing Python packages (first time: torch and its CUDA libraries, ~3 GB)"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r "$repo/requirements-dev.txt"
    if [ -f "$repo/python/pyproject.toml" ]; then
        "$venv/bin/python" -m pip install -q --no-deps -e "$repo/python"
    fi
    echo "$want" >"$stamp"
fi

echo "setup: building kforge"
cargo build --quiet --manifest-path "$repo/Cargo.toml" --bin kforge
