#!/usr/bin/env bash
# The main job on embedded defaults: build the example kernels, start a local hub on 127.0.0.1, push them,
# load them with get_kernel (kforge's loader and HF's genuine `kernels`), run them and check the results.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
venv="${KFORGE_VENV:-$repo/.venv}"
exec "$venv/bin/python" "$repo/scripts/demo.py" "$@"
