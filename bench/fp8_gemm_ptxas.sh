#!/usr/bin/env bash
# Resource report of the fp8-gemm sm_90a kernels (registers, spills, compiler warnings) without a GPU: compiles
# gemm_cuda.cu for sm_90a only with the pinned nvcc that `kforge build` fetched. The loadable build itself comes
# from `kforge build kernels/fp8-gemm --backend cuda`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NVCC=${NVCC:-$(ls -d "${KFORGE_CACHE:-$HOME/.cache/kforge}"/toolchains/*/bin/nvcc 2>/dev/null | head -1)}
[[ -x "$NVCC" ]] || { echo "no nvcc: run 'kforge build kernels/fp8-gemm --backend cuda' first, or set NVCC" >&2; exit 1; }
CUDA=$(dirname "$(dirname "$NVCC")")
PY=${PYTHON:-$ROOT/.venv/bin/python}
TI=$("$PY" -c "from torch.utils import cpp_extension as c; print(' '.join('-I' + p for p in c.include_paths()))")
PI=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 -Xcompiler -fPIC -D_GLIBCXX_USE_CXX11_ABI=1 $TI -I"$PI" -I"$CUDA/include" \
  -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c "$ROOT/kernels/fp8-gemm/gemm_cuda/gemm_cuda.cu" \
  -o "$OUT/gemm_cuda.o" 2> "$OUT/ptxas.log" || { cat "$OUT/ptxas.log"; exit 1; }
grep -iE "warning" "$OUT/ptxas.log" || true
# ptxas reports serialized wgmma (C7514 and kin) only as `info` lines.
grep -E "\(C75[0-9][0-9]\)" "$OUT/ptxas.log" || true
# One line per kernel: name (templates shortened), registers, spills.
awk '/Compiling entry/ { match($0, /_Z[A-Za-z0-9_]*/); name = substr($0, RSTART, RLENGTH) }
     /spill stores/ { spill = $0; sub(/^ +/, "", spill) }
     /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print name ": " substr($0, RSTART, RLENGTH) "; " spill }' \
  "$OUT/ptxas.log" | sed -E 's/_ZN7fp8gemm4sm9011gemm_kernelILNS0_4ElemE([0-9])ELi([0-9])ELi([0-9]+)ELi([0-9])E.*:/sm90 gemm elem=\1 nc=\2 bn=\3 waves=\4:/'
