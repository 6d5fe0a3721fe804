// Runs kernels/relu/relu_rocm/relu.hip on the CPU through amdgcn_emu.h. The kernels have no barriers, so their
// work-items run one after another over a 3-workgroup grid (exercising the grid-stride loop and the tail).
// stdin: int32 dtype (0 f32, 1 f64, 2 f16, 3 bf16), int64 n, n elements. stdout: the n results.
#include "amdgcn_emu.h"

#include "../../../kernels/relu/relu_rocm/relu.hip"

#include <cstdio>
#include <cstdlib>

int main() {
  int dtype = -1;
  long n = -1;
  if (std::fread(&dtype, 4, 1, stdin) != 1 || std::fread(&n, 8, 1, stdin) != 1 || dtype < 0 || dtype > 3 || n < 0) {
    std::fprintf(stderr, "bad header: expected int32 dtype in 0..3 and int64 n >= 0\n");
    return 2;
  }
  const size_t width = dtype == 0 ? 4 : dtype == 1 ? 8 : 2;
  // 16-byte aligned buffers, as torch allocations are (the vector path needs it).
  std::vector<relu_rocm::u32x4> in((n * width + 15) / 16 + 1), out(in.size());
  if (std::fread(in.data(), width, n, stdin) != (size_t)n) {
    std::fprintf(stderr, "short input: expected %ld elements\n", n);
    return 2;
  }
  emu::grid_x = 3;
  for (int x = 0; x < emu::grid_x; ++x)
    for (int t = 0; t < 256; ++t) {
      emu::bid_x = x;
      emu::tid = t;
      switch (dtype) {
        case 0: relu_f32((unsigned int*)out.data(), (const unsigned int*)in.data(), n); break;
        case 1: relu_f64((unsigned long*)out.data(), (const unsigned long*)in.data(), n); break;
        case 2: relu_f16((unsigned short*)out.data(), (const unsigned short*)in.data(), n); break;
        default: relu_bf16((unsigned short*)out.data(), (const unsigned short*)in.data(), n); break;
      }
    }
  std::fwrite(out.data(), width, n, stdout);
  return 0;
}
