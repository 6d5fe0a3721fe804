// Operand preparation for the sm_90a kernel, which reads K-major rows through TMA: MN-major inputs are
// transposed (shared-memory tiles, 4-byte accesses on both sides), fnuz bits are remapped onto fn, and strict
// mode widens e4m3 to bf16 (exact: every e4m3/e4m3fnuz value is a bf16 value).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp8gemm::prep {

enum class Mode { kCopy, kFnuzToFn, kToBf16Fn, kToBf16Fnuz };

// fnuz bits read as fn are the fn value x2 (the kernel scales by 1/4); 0x80 (fnuz NaN) becomes fn NaN and
// fnuz +-240 (bits 0x7F/0xFF, NaN in fn) saturates to fn +-448, i.e. +-224 after the 1/4 (documented).
__device__ __forceinline__ uint8_t fnuz_to_fn_bits(uint8_t b) {
  if (b == 0x80) return 0x7F;
  if ((b & 0x7F) == 0x7F) return (b & 0x80) | 0x7E;
  return b;
}

__device__ __forceinline__ __nv_bfloat16 widen(uint8_t b, bool fnuz) {
  if (fnuz && b == 0x80) return __float2bfloat16_rn(__int_as_float(0x7fc00000));
  if (fnuz && (b & 0x7F) == 0x7F) return __float2bfloat16_rn((b & 0x80) ? -240.f : 240.f);
  __nv_fp8_e4m3 v;
  v.__x = b;
  const float f = static_cast<float>(v);
  return __float2bfloat16_rn(fnuz ? 0.5f * f : f);  // exact: a power-of-two step of an e4m3 value
}

template <Mode kMode>
struct Out {
  using T = uint8_t;
};
template <>
struct Out<Mode::kToBf16Fn> {
  using T = __nv_bfloat16;
};
template <>
struct Out<Mode::kToBf16Fnuz> {
  using T = __nv_bfloat16;
};

template <Mode kMode>
__device__ __forceinline__ typename Out<kMode>::T convert(uint8_t b) {
  if constexpr (kMode == Mode::kCopy) return b;
  else if constexpr (kMode == Mode::kFnuzToFn) return fnuz_to_fn_bits(b);
  else return widen(b, kMode == Mode::kToBf16Fnuz);
}

constexpr int kTile = 64, kThreads = 256, kPad = 4;

// src element (r, k) at src[r + k * ld] (MN-major); dst row-major [R][ldo]. vec: R % 4 == 0, ld % 4 == 0 and a
// 4-byte aligned base, so a thread reads 4 consecutive r at once.
template <Mode kMode>
__global__ void __launch_bounds__(kThreads)
    transpose_kernel(const uint8_t *src, int64_t ld, typename Out<kMode>::T *dst, int64_t ldo, int R, int K, bool vec) {
  __shared__ uint8_t tile[kTile][kTile + kPad];  // [k][r]
  const int r0 = blockIdx.x * kTile, k0 = blockIdx.y * kTile;
#pragma unroll
  for (int i = 0; i < kTile * kTile / 4 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int kk = idx / (kTile / 4), rr = (idx % (kTile / 4)) * 4;
    const int k = k0 + kk, r = r0 + rr;
    uint32_t v = 0;
    if (k < K) {
      if (vec && r + 3 < R) {
        v = *reinterpret_cast<const uint32_t *>(src + r + k * ld);
      } else {
        for (int q = 0; q < 4; ++q)
          if (r + q < R) v |= uint32_t(src[r + q + k * ld]) << (8 * q);
      }
    }
    *reinterpret_cast<uint32_t *>(&tile[kk][rr]) = v;
  }
  __syncthreads();
  using T = typename Out<kMode>::T;
#pragma unroll
  for (int i = 0; i < kTile * kTile / 4 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int rr = idx / (kTile / 4), kk = (idx % (kTile / 4)) * 4;
    const int r = r0 + rr, k = k0 + kk;
    if (r >= R || k >= K) continue;
    T o[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) o[q] = convert<kMode>(tile[kk + q][rr]);
    T *d = dst + int64_t(r) * ldo + k;
    if (k + 3 < K) {
      if constexpr (sizeof(T) == 1) {
        *reinterpret_cast<uint32_t *>(d) =
            uint32_t(o[0]) | uint32_t(o[1]) << 8 | uint32_t(o[2]) << 16 | uint32_t(o[3]) << 24;
      } else {
        *reinterpret_cast<uint2 *>(d) = *reinterpret_cast<const uint2 *>(o);
      }
    } else {
      for (int q = 0; q < 4 && k + q < K; ++q) d[q] = o[q];
    }
  }
}

// src element (r, k) at src[r * ld + k] (K-major rows); dst row-major [R][ldo]; one thread per 4 elements,
// read as one 4-byte word when `vec` (K % 4 == 0, ld % 4 == 0, 4-byte aligned base).
template <Mode kMode>
__global__ void __launch_bounds__(kThreads)
    rows_kernel(const uint8_t *src, int64_t ld, typename Out<kMode>::T *dst, int64_t ldo, int R, int K, bool vec) {
  using T = typename Out<kMode>::T;
  const int groups = (K + 3) / 4;
  const int64_t total = int64_t(R) * groups;
  for (int64_t g = blockIdx.x * int64_t(kThreads) + threadIdx.x; g < total; g += int64_t(gridDim.x) * kThreads) {
    const int r = int(g / groups), k = int(g % groups) * 4;
    T *d = dst + int64_t(r) * ldo + k;
    if (vec) {
      const uint32_t w = *reinterpret_cast<const uint32_t *>(src + r * ld + k);
      T o[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) o[q] = convert<kMode>(uint8_t(w >> (8 * q)));
      if constexpr (sizeof(T) == 1) {
        *reinterpret_cast<uint32_t *>(d) =
            uint32_t(o[0]) | uint32_t(o[1]) << 8 | uint32_t(o[2]) << 16 | uint32_t(o[3]) << 24;
      } else {
        *reinterpret_cast<uint2 *>(d) = *reinterpret_cast<const uint2 *>(o);
      }
    } else {
      for (int q = 0; q < 4 && k + q < K; ++q) d[q] = convert<kMode>(src[r * ld + k + q]);
    }
  }
}

}  // namespace fp8gemm::prep
