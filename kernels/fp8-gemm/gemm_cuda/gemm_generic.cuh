// Generic CUDA path (any arch, any strides): 64x64 output tiles, exact fp32 products, scales applied per 128-K
// block. Slow (no tensor cores) but per-element accurate, so it also serves strict mode off sm_90a.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp8gemm::generic {
constexpr int kTile = 64, kKStep = 32, kThreads = 256;  // each thread owns a 4x4 block of the tile

__device__ __forceinline__ float decode(uint8_t bits, bool fnuz) {
  if (fnuz) {
    if (bits == 0x80) return __int_as_float(0x7fc00000);
    __nv_fp8_e4m3 v;
    v.__x = bits;
    return 0.5f * static_cast<float>(v);  // same bits as e4m3fn, one more exponent bias
  }
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

__global__ void __launch_bounds__(kThreads) gemm_generic(const uint8_t *a, int64_t a_s0, int64_t a_s1,
                                                         const uint8_t *b, int64_t b_s0, int64_t b_s1,
                                                         const float *as, int64_t as_s0, int64_t as_s1,
                                                         const float *bs, int64_t bs_s0, int64_t bs_s1,
                                                         __nv_bfloat16 *c, int M, int N, int K, bool fnuz) {
  __shared__ float sa[kKStep][kTile + 1], sb[kKStep][kTile + 1];
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int tm = (threadIdx.x / 16) * 4, tn = (threadIdx.x % 16) * 4;
  float acc[4][4] = {}, part[4][4];
  for (int kb0 = 0; kb0 < K; kb0 += 128) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) part[i][j] = 0.f;
    for (int k0 = kb0; k0 < min(K, kb0 + 128); k0 += kKStep) {
      for (int e = threadIdx.x; e < kTile * kKStep; e += kThreads) {
        const int r = e / kKStep, kk = e % kKStep, k = k0 + kk;
        const bool kin = k < K && k < kb0 + 128;
        sa[kk][r] = (kin && m0 + r < M) ? decode(a[(m0 + r) * a_s0 + k * a_s1], fnuz) : 0.f;
        sb[kk][r] = (kin && n0 + r < N) ? decode(b[(n0 + r) * b_s0 + k * b_s1], fnuz) : 0.f;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kKStep; ++kk) {
        float av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = sa[kk][tm + i], bv[i] = sb[kk][tn + i];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) part[i][j] = fmaf(av[i], bv[j], part[i][j]);
      }
      __syncthreads();
    }
    const int kb = kb0 / 128;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = min(m0 + tm + i, M - 1);
      const float sa_ = as[m * as_s0 + kb * as_s1];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = min(n0 + tn + j, N - 1);
        acc[i][j] = fmaf(sa_ * bs[(n / 128) * bs_s0 + kb * bs_s1], part[i][j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + tm + i, n = n0 + tn + j;
      if (m < M && n < N) c[static_cast<int64_t>(m) * N + n] = __float2bfloat16(acc[i][j]);
    }
}
}  // namespace fp8gemm::generic
