// Runs kernels/fp8-gemm/gemm_rocm/fp8_gemm_gfx942.hip on the CPU through amdgcn_emu.h, with the same host steps
// as the ROCm glue in that file (fn -> fnuz rewrite with alpha = 4, a_scale transposed and padded to 4 rows).
// stdin: int32 M, N, K, is_fn; a bytes [M][K]; b bytes [N][K]; a_scale f32 [M][K/128]; b_scale f32
// [ceil(N/128)][K/128]. stdout: c as bf16 bits [M][N].
#include "amdgcn_emu.h"

#include "../../../kernels/fp8-gemm/gemm_rocm/fp8_gemm_gfx942.hip"

#include <cstdio>
#include <cstdlib>

template <typename T>
static std::vector<T> read_n(size_t n) {
  std::vector<T> v(n);
  if (n && std::fread(v.data(), sizeof(T), n, stdin) != n) {
    std::fprintf(stderr, "short input: expected %zu items of %zu bytes\n", n, sizeof(T));
    std::exit(2);
  }
  return v;
}

static void fn_to_fnuz(std::vector<unsigned char>& bytes) {
  const long n = (long)bytes.size();
  unsigned int* words = (unsigned int*)bytes.data();
  const int blocks = (int)((n / 4 + 255) / 256);
  // No barriers in this kernel: its work-items can run one after another.
  for (int x = 0; x < blocks; ++x)
    for (int t = 0; t < 256; ++t) {
      emu::bid_x = x;
      emu::tid = t;
      fp8_fn_to_fnuz(words, n);
    }
}

int main() {
  const auto dims = read_n<int>(4);
  const int M = dims[0], N = dims[1], K = dims[2], is_fn = dims[3];
  if (K % 128 != 0) {
    std::fprintf(stderr, "K must be a multiple of 128\n");
    return 2;
  }
  const int kb = K / 128, nb = (N + 127) / 128;
  auto a = read_n<unsigned char>((size_t)M * K);
  auto b = read_n<unsigned char>((size_t)N * K);
  const auto a_scale = read_n<float>((size_t)M * kb);
  const auto b_scale = read_n<float>((size_t)nb * kb);
  float alpha = 1.0f;
  if (is_fn) {
    fn_to_fnuz(a);
    fn_to_fnuz(b);
    alpha = 4.0f;
  }
  const int ld_sa = (M + 3) / 4 * 4;
  std::vector<float> sa_t((size_t)kb * ld_sa, 0.0f);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < kb; ++k) sa_t[(size_t)k * ld_sa + m] = a_scale[(size_t)m * kb + k];
  std::vector<unsigned short> c((size_t)M * N, 0);
  emu::launch(nb, (M + 127) / 128, 256, [&] {
    fp8_gemm_blockscaled_gfx942(a.data(), b.data(), sa_t.data(), b_scale.data(), c.data(), M, N, K, K, K, ld_sa,
                                kb, 1, N, alpha);
  });
  std::fwrite(c.data(), sizeof(unsigned short), c.size(), stdout);
  return 0;
}
