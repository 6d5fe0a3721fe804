// CPU reference backend: dequantise per 128-K block, accumulate in fp32, scale per block, store bf16.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <vector>

namespace {
constexpr int64_t kBlock = 128;

// Decodes e4m3 bits; fnuz has exponent bias 8 (half the value of fn) and 0x80 as its only NaN.
float decode_e4m3(uint8_t bits, bool fnuz) {
  const int sign = bits >> 7, exp = (bits >> 3) & 0xF, man = bits & 0x7;
  if (fnuz && bits == 0x80) return std::numeric_limits<float>::quiet_NaN();
  if (!fnuz && exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const int bias = fnuz ? 8 : 7;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man) / 8.0f, 1 - bias)
                     : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - bias);
  return sign ? -v : v;
}

// Copies a strided fp8 matrix into a row-major fp32 one (any strides: K-major, MN-major, sliced).
std::vector<float> to_rows(const at::Tensor &t, bool fnuz) {
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = decode_e4m3(static_cast<uint8_t>(i), fnuz);
  const int64_t R = t.size(0), C = t.size(1), s0 = t.stride(0), s1 = t.stride(1);
  const auto *p = reinterpret_cast<const uint8_t *>(t.data_ptr());
  std::vector<float> out(static_cast<size_t>(R * C));
  at::parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < C; ++c) out[r * C + c] = lut[p[r * s0 + c * s1]];
  });
  return out;
}
}  // namespace

void gemm_cpu(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
              at::Tensor &c) {
  const bool fnuz = a.scalar_type() == at::kFloat8_e4m3fnuz;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
  const int64_t KB = (K + kBlock - 1) / kBlock;
  const std::vector<float> af = to_rows(a, fnuz), bf = to_rows(b, fnuz);
  const auto as = a_scale.accessor<float, 2>();
  const auto bs = b_scale.accessor<float, 2>();
  auto *out = c.data_ptr<at::BFloat16>();
  constexpr int64_t kTileN = 64;
  // Rows in parallel; within a row, a tile of N stays hot while K streams through in 128-blocks.
  at::parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
    std::vector<float> acc(kTileN);
    for (int64_t m = m0; m < m1; ++m) {
      const float *arow = &af[m * K];
      for (int64_t n0 = 0; n0 < N; n0 += kTileN) {
        const int64_t n1 = std::min(N, n0 + kTileN);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t kb = 0; kb < KB; ++kb) {
          const int64_t k0 = kb * kBlock, k1 = std::min(K, k0 + kBlock);
          for (int64_t n = n0; n < n1; ++n) {
            const float *brow = &bf[n * K];
            float partial = 0.0f;
            for (int64_t k = k0; k < k1; ++k) partial += arow[k] * brow[k];
            acc[n - n0] += as[m][kb] * bs[n / kBlock][kb] * partial;
          }
        }
        for (int64_t n = n0; n < n1; ++n) out[m * N + n] = static_cast<at::BFloat16>(acc[n - n0]);
      }
    }
  });
}
