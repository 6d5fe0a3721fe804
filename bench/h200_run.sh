#!/usr/bin/env bash
# One device call: SASS check, error maps, GPU tests, benchmark; results in $OUT.
# Usage (on the H200, repo root): bash bench/h200_run.sh SO COMMIT NVCC_VERSION [bench args...]
set -uo pipefail
SO=$(realpath "$1") COMMIT=$2 NVCC=$3
shift 3
OUT=${OUT:-/tmp/fp8out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FP8GEMM_SO=$SO
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
cuobjdump --dump-sass "$SO" | grep -oE "QGMMA[.A-Z0-9x]*|HGMMA[.A-Z0-9x]*" | sort | uniq -c
[[ -n "${SKIP_DIAG:-}" ]] || timeout 100 python3 bench/fp8_gemm_diag.py "$SO" 2>&1 | tee "$OUT/diag.log"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rf kernels/fp8-gemm/tests/test_gemm_gpu.py \
  2>&1 | tee "$OUT/gpu_tests.log" | tail -30
timeout "${BENCH_TIMEOUT:-300}" python3 bench/fp8_gemm.py --so "$SO" --commit "$COMMIT" --nvcc "$NVCC" \
  --out-dir "$OUT" "$@" 2>&1 | tee "$OUT/bench.log"
