#!/usr/bin/env bash
# On a GPU machine without network (the lent H200): the README's main job with the CUDA variants that
# `kforge build` made on the CPU machine — local hub → kforge push → kforge.get_kernel and kernels.get_kernel →
# run on the GPU → compare — then the GPU tests of both kernels against those same kforge-built artifacts.
# Needs: kernels/*/build/ (built elsewhere), the kforge binary in $KFORGE_BIN, and the Python wheels the loader
# needs in .whl/ (kernels, huggingface_hub and its HTTP client), installed here without network.
set -uo pipefail
OUT=${OUT:-/tmp/kforge-device-check}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD/python" PYTHONUNBUFFERED=1
{
  git log -1 --format='commit %H' 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, kernels, huggingface_hub; print("torch", torch.__version__, "| kernels", kernels.__version__, "| huggingface_hub", huggingface_hub.__version__)'
} 2>&1 | tee "$OUT/machine.txt"
status=0
timeout 240 python3 scripts/demo.py --skip-build 2>&1 | tee "$OUT/demo.log" || status=1
KFORGE_RELU_BUILD=kernels/relu timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu -rf kernels/relu/tests \
  2>&1 | tee "$OUT/relu-gpu-tests.log" || status=1
so=$(ls kernels/fp8-gemm/build/torch211-cxx11-cu130-x86_64-linux/*.abi3.so)
FP8GEMM_SO=$so timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu -rf kernels/fp8-gemm/tests/test_gemm_gpu.py \
  2>&1 | tee "$OUT/fp8-gemm-gpu-tests.log" || status=1
exit $status
