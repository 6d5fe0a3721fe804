// Operand preparation for the sm_90a kernel, which reads K-major rows through TMA: MN-major inputs are
// transposed (shared-memory tiles, 16-byte accesses where alignment allows), fnuz bits are remapped onto fn,
// and strict mode widens e4m3 to bf16 (exact: every e4m3/e4m3fnuz value is a bf16 value) or, for the kernel that
// widens A in registers, B to f16 with K permuted inside every 16 (kToF16Perm, below), or, for the kernels that
// read MN-major A into registers, B as e4m3 with K permuted to match (kCopyPerm16; fast mode) or as f16 in K
// order (kToF16; strict mode, whose ldmatrix.trans fragments hold K in order).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp8gemm::prep {

enum class Mode { kCopy, kFnuzToFn, kToBf16Fn, kToBf16Fnuz, kToF16Perm, kCopyPerm16, kToF16 };

// kToF16Perm (e4m3fn -> f16, exact): within every 16 K the byte pairs (K 2i, 2i + 1) are stored in the order
// 0, 2, 4, 6, 1, 3, 5, 7 -- the K order in which the sm_90a kernel's ldmatrix-loaded A fragments hold them
// (sm90 ldsm_a_e4m3 / widen_a_pair). Callers give it K % 16 == 0. A thread writes 8 outputs (16 bytes, so a
// warp's stores stay contiguous): the even or the odd pairs of its 16-K group.
template <Mode kMode>
constexpr bool kPermuted = kMode == Mode::kToF16Perm;
__device__ __forceinline__ void permuted_half(const uint32_t (&g)[4], int odd, uint32_t (&w)[2]) {
  const uint32_t sel = odd ? 0x7632 : 0x5410;
  w[0] = __byte_perm(g[0], g[1], sel), w[1] = __byte_perm(g[2], g[3], sel);
}

// kCopyPerm16 (e4m3 bits unchanged): within every 16 K, byte 4c + q holds K 2c + q % 2 + 8 (q / 2) -- the K
// order of the A fragments the sm_90a kernel reads from MN-major rows with ldmatrix.trans (sm90 lds_a_mn_e4m3).
// g: the group's K 0-3, 4-7, 8-11, 12-15. Callers give it K % 16 == 0.
__device__ __forceinline__ void perm16_e4m3(const uint32_t (&g)[4], uint32_t *o) {
  o[0] = __byte_perm(g[0], g[2], 0x5410), o[1] = __byte_perm(g[0], g[2], 0x7632);
  o[2] = __byte_perm(g[1], g[3], 0x5410), o[3] = __byte_perm(g[1], g[3], 0x7632);
}

// The e4m3 pair in bytes 2h, 2h + 1 of w as f16x2 (exact; the lower byte in the lower half): one cvt for two.
// On sm_89+ the half is named in the cvt's operand, which ptxas folds into F2FP's .H1 source selector (the
// intrinsic's shift cost one SHF per high half: 16 per 128-K block in the register-A consumers).
__device__ __forceinline__ uint32_t f16x2_of_e4m3x2(uint32_t w, int h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t d;
  if (h == 0)
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(d) : "r"(w));
  else
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(d) : "r"(w));
  return d;
#else
  const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * h)), __NV_E4M3);
  return uint32_t(r.x) | uint32_t(r.y) << 16;
#endif
}

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
template <>
struct Out<Mode::kToF16Perm> {
  using T = __half;
};
template <>
struct Out<Mode::kToF16> {
  using T = __half;
};

template <Mode kMode>
__device__ __forceinline__ typename Out<kMode>::T convert(uint8_t b) {
  if constexpr (kMode == Mode::kCopy || kMode == Mode::kCopyPerm16) return b;
  else if constexpr (kMode == Mode::kFnuzToFn) return fnuz_to_fn_bits(b);
  else if constexpr (kMode == Mode::kToF16Perm || kMode == Mode::kToF16)
    return __half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3));
  else return widen(b, kMode == Mode::kToBf16Fnuz);
}

constexpr int kTile = 128, kThreads = 256;

// Lets the GEMM launched next as a programmatic dependent (PDL) start its prologue while this grid runs; it
// waits for this grid's completion before it reads what this grid writes.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ uint16_t bits16(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint16_t bits16(__half v) { return __half_as_ushort(v); }

// The 4 bytes of w (lowest first), converted and packed into sizeof(T) words.
template <Mode kMode>
__device__ __forceinline__ void convert4(uint32_t w, uint32_t *o) {
  if constexpr (kMode == Mode::kCopy || kMode == Mode::kCopyPerm16) {
    o[0] = w;
  } else if constexpr (kMode == Mode::kToF16) {  // a cvt per pair
    o[0] = f16x2_of_e4m3x2(w, 0), o[1] = f16x2_of_e4m3x2(w, 1);
  } else if constexpr (sizeof(typename Out<kMode>::T) == 1) {
    o[0] = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) o[0] |= uint32_t(convert<kMode>(uint8_t(w >> (8 * q)))) << (8 * q);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      o[h] = uint32_t(bits16(convert<kMode>(uint8_t(w >> (16 * h))))) |
             uint32_t(bits16(convert<kMode>(uint8_t(w >> (16 * h + 8))))) << 16;
  }
}

// kN (2 or 4) words from a 4 * kN byte aligned p.
template <int kN>
__device__ __forceinline__ void load_words(const void *p, uint32_t *w) {
  if constexpr (kN == 4) {
    const uint4 v = *reinterpret_cast<const uint4 *>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2 *>(p);
    w[0] = v.x, w[1] = v.y;
  }
}

// The first n bytes from p (n may be <= 0 or > 4), one word load when `vec` and n >= 4: the callers' `vec`
// then guarantees a 4-byte aligned p.
__device__ __forceinline__ uint32_t load4(const uint8_t *p, int n, bool vec) {
  if (vec && n >= 4) return *reinterpret_cast<const uint32_t *>(p);
  uint32_t w = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < n) w |= uint32_t(p[j]) << (8 * j);
  return w;
}

// 16 bytes o to d: one store when all n >= 16 are wanted (d is then 16-byte aligned: ldo * sizeof(T) is a
// multiple of 16 and the base is aligned), else the first n bytes.
__device__ __forceinline__ void store16(uint8_t *d, const uint32_t *o, int n) {
  if (n >= 16) {
    *reinterpret_cast<uint4 *>(d) = make_uint4(o[0], o[1], o[2], o[3]);
  } else {
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < n) d[b] = uint8_t(o[b / 4] >> (8 * (b % 4)));
  }
}

// Shared tile [r][k] as words; each row's 16-byte chunks are XOR-swizzled by r / 16 so that a warp's
// transposed 4-byte writes (8 rows 16 apart x 4 k words) and its 16- or 8-byte row reads are conflict-free.
__device__ __forceinline__ int swizzle(int r) { return (r / 16 % 8) * 4; }

// src element (r, k) at src[r + k * ld] (MN-major); dst row-major [R][ldo]. Each thread loads 16 r x 4 k
// bytes (four 16-byte loads when ld and the base are 16-byte aligned; else 4-byte words when `vec`, i.e.
// R % 4 == 0, ld % 4 == 0 and a 4-byte aligned base; else single bytes), transposes them in registers as 4x4
// byte blocks and writes words of 4 k; rows then leave shared memory as 16-byte stores.
// One MN-major operand to transpose (dst: Out<its mode>::T); both operands of a GEMM go in one launch
// (blockIdx.z picks one, each with its own mode), so the second does not wait for the first one's launch and
// tail.
struct TransposeJob {
  const uint8_t *src;
  int64_t ld;
  void *dst;
  int64_t ldo;
  int R;
  bool vec;
};

struct TransposeJobs {
  TransposeJob job[2];
};

template <Mode kMode>
__device__ __forceinline__ void transpose_tile(const TransposeJob &job, int K, uint32_t (&tile)[kTile][kTile / 4]) {
  using T = typename Out<kMode>::T;
  const uint8_t *src = job.src;
  const int64_t ld = job.ld, ldo = job.ldo;
  const int R = job.R;
  const bool vec = job.vec;
  T *dst = static_cast<T *>(job.dst);
  const int r0 = blockIdx.x * kTile, k0 = blockIdx.y * kTile;
  if (r0 >= R) return;  // the grid covers the taller operand
  // A warp reads 4 k rows of 128 contiguous bytes.
  const int rv = threadIdx.x % 8 * 16, kw = threadIdx.x / 8;
  const int r = r0 + rv, k = k0 + kw * 4;
  const uint8_t *s = src + r + k * ld;
  uint32_t v[4][4];  // [k][r / 4]
  if (r + 16 <= R && k + 4 <= K && ld % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
#pragma unroll
    for (int q = 0; q < 4; ++q) load_words<4>(s + q * ld, v[q]);
  } else {
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int c = 0; c < 4; ++c) v[q][c] = k + q < K ? load4(s + q * ld + 4 * c, R - r - 4 * c, vec) : 0;
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint32_t lo01 = __byte_perm(v[0][c], v[1][c], 0x5140), hi01 = __byte_perm(v[0][c], v[1][c], 0x7362);
    const uint32_t lo23 = __byte_perm(v[2][c], v[3][c], 0x5140), hi23 = __byte_perm(v[2][c], v[3][c], 0x7362);
    uint32_t *t = &tile[rv + 4 * c][kw ^ swizzle(rv)];
    t[0] = __byte_perm(lo01, lo23, 0x5410);  // row rv + 4c + j: k .. k + 3
    t[kTile / 4] = __byte_perm(lo01, lo23, 0x7632);
    t[2 * kTile / 4] = __byte_perm(hi01, hi23, 0x5410);
    t[3 * kTile / 4] = __byte_perm(hi01, hi23, 0x7632);
  }
  __syncthreads();
  // Each 16-byte store takes kVec elements; a warp store covers whole tile rows.
  constexpr int kVec = 16 / sizeof(T), kPerRow = kTile / kVec, kIters = kTile * kPerRow / kThreads;
  uint32_t w[kIters][kVec / 4];  // all shared reads first, so their latencies overlap
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int idx = threadIdx.x + i * kThreads, rl = idx / kPerRow, kl = idx % kPerRow * kVec;
    if constexpr (kPermuted<kMode>) {
      uint32_t g[4];  // the 16-K group (a whole 16-byte chunk: the swizzle moves chunks)
      load_words<4>(&tile[rl][kl / 16 * 4 ^ swizzle(rl)], g);
      permuted_half(g, kl / 8 % 2, w[i]);
    } else if constexpr (kMode == Mode::kCopyPerm16) {  // kVec = 16: the chunk is one 16-K group
      uint32_t g[4];
      load_words<4>(&tile[rl][kl / 4 ^ swizzle(rl)], g);
      perm16_e4m3(g, w[i]);
    } else {
      load_words<kVec / 4>(&tile[rl][kl / 4 ^ swizzle(rl)], w[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int idx = threadIdx.x + i * kThreads, rl = idx / kPerRow, kl = idx % kPerRow * kVec;
    if (r0 + rl >= R || k0 + kl >= K) continue;
    uint32_t o[4];
#pragma unroll
    for (int c = 0; c < kVec / 4; ++c) convert4<kMode>(w[i][c], o + c * sizeof(T));
    store16(reinterpret_cast<uint8_t *>(dst + (r0 + rl) * ldo + k0 + kl), o, (K - k0 - kl) * int(sizeof(T)));
  }
}

template <Mode kMode0, Mode kMode1>
__global__ void __launch_bounds__(kThreads) transpose_kernel(const TransposeJobs jobs, int K) {
  static_assert(kTile == 128 && kThreads == 256, "one 16 r x 4 k block per thread covers the tile");
  __shared__ __align__(16) uint32_t tile[kTile][kTile / 4];
  allow_dependents();
  if (blockIdx.z == 0) transpose_tile<kMode0>(jobs.job[0], K, tile);  // no dynamic index: no stack
  else transpose_tile<kMode1>(jobs.job[1], K, tile);
}

// src element (r, k) at src[r * ld + k] (K-major rows); dst row-major [R][ldo]; one thread per 16-byte store
// (16 or 8 elements), read at once when ld and the base allow, else as 4-byte words when `vec` (K % 4 == 0,
// ld % 4 == 0, 4-byte aligned base), else as bytes. (kToF16Perm: widen_perm_kernel.)
template <Mode kMode>
__global__ void __launch_bounds__(kThreads)
    rows_kernel(const uint8_t *src, int64_t ld, typename Out<kMode>::T *dst, int64_t ldo, int R, int K, bool vec) {
  using T = typename Out<kMode>::T;
  static_assert(!kPermuted<kMode>, "kToF16Perm: widen_perm_kernel");
  constexpr int kVec = 16 / sizeof(T);
  allow_dependents();
  const bool wide = ld % kVec == 0 && reinterpret_cast<uintptr_t>(src) % kVec == 0;
  const int groups = (K + kVec - 1) / kVec;
  const int64_t total = int64_t(R) * groups;
  for (int64_t g = blockIdx.x * int64_t(kThreads) + threadIdx.x; g < total; g += int64_t(gridDim.x) * kThreads) {
    const int r = int(g / groups), k = int(g % groups) * kVec;
    const uint8_t *s = src + r * ld + k;
    uint32_t w[kVec / 4], o[4];
    if (wide && k + kVec <= K) {
      load_words<kVec / 4>(s, w);
    } else {
#pragma unroll
      for (int c = 0; c < kVec / 4; ++c) w[c] = load4(s + 4 * c, K - k - 4 * c, vec);
    }
    if constexpr (kMode == Mode::kCopyPerm16) {
      perm16_e4m3(w, o);
    } else {
#pragma unroll
      for (int c = 0; c < kVec / 4; ++c) convert4<kMode>(w[c], o + c * sizeof(T));
    }
    store16(reinterpret_cast<uint8_t *>(dst + r * ldo + k), o, (K - k) * int(sizeof(T)));
  }
}

// kToF16Perm on K-major rows (K % 16 == 0, ldo % 8 == 0): one thread per 16-byte store, the even or the odd
// pairs of a 16-K group (so a warp's store covers 512 contiguous bytes; threads that wrote a group's 32 bytes
// each measured 1.4x slower on the H200), the group's 16 bytes read at once where `wide` (ld and the base
// 16-byte aligned; else as words, `vec` as in rows_kernel) and widened a pair per cvt; two stores a round,
// both loads in flight first. 32-bit indices: the host launches it on row slices of fewer than 2^30 groups.
// Against rows_kernel's per-element conversions and 64-bit index division (ALU 53 % busy under ncu) it took
// 0.87-0.96x the time on the H200: the pass is bound by its 3 bytes of traffic per element
// (logs/fp8-gemm-ab-widen-perm-kernel.log).
__global__ void __launch_bounds__(kThreads)
    widen_perm_kernel(const uint8_t *src, int64_t ld, __half *dst, int64_t ldo, int R, int groups, bool wide, bool vec) {
  allow_dependents();
  const uint32_t total = 2 * uint32_t(R) * uint32_t(groups), stride = gridDim.x * kThreads;
  for (uint32_t i0 = blockIdx.x * kThreads + threadIdx.x; i0 < total; i0 += 2 * stride) {
    uint32_t w[2][4], r[2], k[2];
    const bool second = i0 + stride < total;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t i = j == 0 || second ? i0 + j * stride : i0;  // past the end: reloads the first, stores nothing
      const uint32_t g = i / 2;
      r[j] = g / uint32_t(groups), k[j] = (g - r[j] * uint32_t(groups)) * 16;
      const uint8_t *s = src + r[j] * ld + k[j];
      if (wide) {
        load_words<4>(s, w[j]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) w[j][c] = load4(s + 4 * c, 4, vec);
      }
      k[j] += 8 * (i % 2);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if (j == 1 && !second) break;
      uint32_t half[2];
      permuted_half(w[j], k[j] / 8 % 2, half);
      *reinterpret_cast<uint4 *>(dst + r[j] * ldo + k[j]) =
          make_uint4(f16x2_of_e4m3x2(half[0], 0), f16x2_of_e4m3x2(half[0], 1), f16x2_of_e4m3x2(half[1], 0),
                     f16x2_of_e4m3x2(half[1], 1));
    }
  }
}

}  // namespace fp8gemm::prep
