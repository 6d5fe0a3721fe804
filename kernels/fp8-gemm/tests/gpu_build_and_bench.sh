#!/usr/bin/env bash
# On the H200: builds the cpu+cuda variant with nvcc/g++-13 and runs bench/fp8_gemm.py (dev loop, not CI).
set -euo pipefail
K=kernels/fp8-gemm; W=/tmp/fp8build; mkdir -p $W
python3 -c "import sys; sys.path.insert(0,'$K/tests'); import conftest; open('$W/registration.h','w').write(conftest.REGISTRATION_H)"
TI=$(python3 -c "from torch.utils import cpp_extension as c; print(' '.join('-I'+p for p in c.include_paths()))")
PI=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
TL=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__)+'/lib')")
DEF="-DTORCH_EXTENSION_NAME=_fp8_gemm_dev -DCPU_KERNEL -DCUDA_KERNEL -D_GLIBCXX_USE_CXX11_ABI=1"
nvcc -O3 -std=c++17 -Xcompiler -fPIC -ccbin /usr/bin/g++-13 $DEF -I$W -I$K/torch-ext $TI -I$PI \
  -gencode=arch=compute_90a,code=sm_90a -c $K/gemm_cuda/gemm_cuda.cu -o $W/gemm_cuda.o -Xptxas -v
/usr/bin/g++-13 -O3 -std=c++17 -fPIC -fopenmp $DEF -I$W -I$K/torch-ext $TI -I$PI -I/usr/local/cuda/include \
  -c $K/torch-ext/torch_binding.cpp -o $W/binding.o
/usr/bin/g++-13 -O3 -std=c++17 -fPIC -fopenmp $DEF -I$W $TI -I$PI -c $K/gemm_cpu/gemm_cpu.cpp -o $W/cpu.o
/usr/bin/g++-13 -shared -fopenmp $W/*.o -L$TL -lc10 -ltorch -ltorch_cpu -lc10_cuda -ltorch_cuda \
  -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$TL -o $W/_fp8_gemm_dev.so
nvidia-smi --query-gpu=name,driver_version --format=csv
PYTHONUNBUFFERED=1 python3 bench/fp8_gemm.py $W/_fp8_gemm_dev.so _fp8_gemm_dev "${OUT:-/tmp}/h200.json"
