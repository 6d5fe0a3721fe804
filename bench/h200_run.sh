#!/usr/bin/env bash
# One device call: GPU tests, SASS check, then the benchmark (optionally with the tile sweep), results in $OUT.
# Usage (on the H200, repo root): bash bench/h200_run.sh COMMIT [--sweep] [--shapes challenge]
set -uo pipefail
COMMIT=$1
shift
SO=$PWD/.device/build/_fp8_gemm_dev.so
OUT=${OUT:-/tmp/fp8out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FP8GEMM_SO=$SO
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
cuobjdump --dump-sass .device/build/gemm_cuda.o | grep -oE "QGMMA[.A-Z0-9x]*|HGMMA[.A-Z0-9x]*" | sort | uniq -c
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider -rf kernels/fp8-gemm/tests/test_gemm_gpu.py \
  2>&1 | tee "$OUT/gpu_tests.log" | tail -40
timeout "${BENCH_TIMEOUT:-300}" python3 bench/fp8_gemm.py --so "$SO" --commit "$COMMIT" \
  --nvcc "$(cat .device/build/nvcc_version.txt)" --out-dir "$OUT" "$@" 2>&1 | tee "$OUT/bench.log"
