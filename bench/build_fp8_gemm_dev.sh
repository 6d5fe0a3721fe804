#!/usr/bin/env bash
# Builds kernels/fp8-gemm (cpu + cuda, sm_90a + sm_80) into .device/build/_fp8_gemm_dev.so on a CPU-only
# machine, with nvcc from the pinned nvidia-* wheels unpacked in .device/cuda and g++ against the venv's torch.
# Stand-in until `kforge build` produces the variant; the .so is loaded with torch.ops.load_library.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
K=$ROOT/kernels/fp8-gemm
CUDA=$ROOT/.device/cuda
PY=$ROOT/.venv/bin/python
W=$ROOT/.device/build
NAME=${FP8GEMM_EXT_NAME:-_fp8_gemm_dev}
ARCHS=${FP8GEMM_ARCHS:--gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80}
mkdir -p "$W"
"$PY" -c "import sys; sys.path.insert(0, '$K/tests'); import conftest; open('$W/registration.h', 'w').write(conftest.REGISTRATION_H)"
TI=$("$PY" -c "from torch.utils import cpp_extension as c; print(' '.join('-I' + p for p in c.include_paths()))")
PI=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
TL=$("$PY" -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')")
DEF="-DTORCH_EXTENSION_NAME=$NAME -DCPU_KERNEL -DCUDA_KERNEL -D_GLIBCXX_USE_CXX11_ABI=1"
INC="-I$W -I$K/torch-ext $TI -I$PI -I$CUDA/include"
if [[ -z "${SKIP_CUDA:-}" ]]; then
  # shellcheck disable=SC2086
  "$CUDA/bin/nvcc" -O3 -std=c++17 -Xcompiler -fPIC $DEF $INC $ARCHS -Xptxas -v \
    -c "$K/gemm_cuda/gemm_cuda.cu" -o "$W/gemm_cuda.o" 2> "$W/ptxas.log" || { cat "$W/ptxas.log"; exit 1; }
  grep -E "gemm_kernel|registers|spill" "$W/ptxas.log" | grep -B1 -E "Used|spill" | grep -v "^--" | head -40 || true
fi
# shellcheck disable=SC2086
g++ -O3 -std=c++17 -fPIC -fopenmp $DEF $INC -c "$K/torch-ext/torch_binding.cpp" -o "$W/binding.o"
# shellcheck disable=SC2086
g++ -O3 -std=c++17 -fPIC -fopenmp $DEF $INC -c "$K/gemm_cpu/gemm_cpu.cpp" -o "$W/cpu.o"
g++ -shared -fopenmp "$W/gemm_cuda.o" "$W/binding.o" "$W/cpu.o" -L"$TL" -lc10 -ltorch -ltorch_cpu -lc10_cuda \
  -ltorch_cuda -L"$CUDA/lib" -l:libcudart.so.13 -Wl,-rpath,"$TL" -o "$W/$NAME.so"
"$CUDA/bin/nvcc" --version | tail -1 > "$W/nvcc_version.txt"
echo "built $W/$NAME.so"
