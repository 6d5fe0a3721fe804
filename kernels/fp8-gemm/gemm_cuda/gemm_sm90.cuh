// sm_90a block-scaled GEMM: TMA -> multi-stage mbarrier ring -> wgmma (e4m3 k32, or bf16 k16 for strict mode)
// with FP32 promotion per 128-K block, persistent CTAs over (tile, K-split) work units, grouped rasterisation.
//
// CTA = 1 producer warpgroup (one thread issues TMA) + NC consumer warpgroups (64 rows of the tile each).
// Per 128-K block a consumer issues 4 (fp8) or 8 (bf16) wgmma into a fresh accumulator, waits, releases the
// stage and folds acc * a_scale[row] * b_scale[col/128] into its FP32 result; with NC = 2 one warpgroup's
// promotion overlaps the other's tensor-core work. Operands are K-major in global memory (the host makes them
// so) and land in shared memory with the 128-byte swizzle that the wgmma descriptors name.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP8GEMM_SM90A 1
#endif

namespace fp8gemm::sm90 {

enum class Elem { kE4M3, kBF16 };

template <Elem E, int N>
struct Wgmma {
  static __device__ void run(float (&d)[N / 2], uint64_t da, uint64_t db, int accumulate);
};

#ifdef FP8GEMM_SM90A
#include "wgmma_ops.cuh"
#endif

constexpr int kQuant = 128;        // K extent of one scale block
constexpr int kRowBytes = 128;     // one swizzle atom row: 128 fp8 or 64 bf16 elements
constexpr int kSplitFlagBytes = 16;

struct Params {
  int M, N, K, KB;        // KB = ceil(K / 128)
  int num_m, num_n;       // tiles along M and N
  int splits;             // K splits per tile (1 = none)
  int group_m;            // rasterisation: tiles of this many M-blocks sweep N together
  int stages;
  const float *b_scale;   // [ceil(N/128), KB], any strides
  int64_t bs_s0, bs_s1;
  float scale_mul;        // 0.25 for fnuz bits read as fn (each operand is half the fn value)
  __nv_bfloat16 *c;       // [M, N] row-major
  float *workspace;       // split-K partials, one BM x BN slot per work unit
  int *counters;          // split-K arrival counters, one per tile, zero between launches
};

template <Elem E>
struct ElemInfo;
template <>
struct ElemInfo<Elem::kE4M3> {
  static constexpr int kSub = 1;      // 128 K = one 128-byte atom row
  static constexpr int kWgmmaK = 32;
};
template <>
struct ElemInfo<Elem::kBF16> {
  static constexpr int kSub = 2;      // 128 K = two 128-byte atom rows
  static constexpr int kWgmmaK = 16;
};

template <Elem E, int NC, int BN>
struct Config {
  static constexpr int BM = 64 * NC;
  static constexpr int kSub = ElemInfo<E>::kSub;
  static constexpr int kABytes = BM * kRowBytes * kSub;
  static constexpr int kBBytes = BN * kRowBytes * kSub;
  static constexpr int kScaleBytes = BM * 4;
  static constexpr int kStageBytes = kABytes + kBBytes + kScaleBytes;
  static constexpr int kThreads = 128 * (NC + 1);
  static constexpr int kAcc = BN / 2;  // accumulator floats per thread (m64 x BN over 128 threads)
  // smem: [stages x (A | B)] 1024-aligned tiles, then [stages x a_scale], then 2 x stages mbarriers, flag.
  static int smem_bytes(int stages) {
    return 1024 + stages * (kABytes + kBBytes + kScaleBytes) + stages * 16 + kSplitFlagBytes;
  }
};

#ifdef FP8GEMM_SM90A
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

__device__ __forceinline__ void prefetch_map(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// K-major operand, 128-byte swizzle: rows of 128 B, 8-row core groups 1024 B apart (SBO); LBO is unused.
__device__ __forceinline__ uint64_t smem_desc(const void *p) {
  const uint32_t addr = smem_u32(p);
  uint64_t d = (addr & 0x3FFFF) >> 4;
  d |= uint64_t(1) << 16;
  d |= uint64_t(1024 >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

template <int R>
__device__ __forceinline__ void fence_regs(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

__device__ __forceinline__ void consumer_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// Work unit -> (m block, n block, split). Splits of one tile are adjacent so they run at the same time.
__device__ __forceinline__ void unit_coords(const Params &p, int unit, int &mb, int &nb, int &split) {
  split = unit % p.splits;
  const int tile = unit / p.splits;
  const int per_group = p.group_m * p.num_n;
  const int group = tile / per_group, first_m = group * p.group_m;
  const int rows = min(p.num_m - first_m, p.group_m);
  const int in_group = tile % per_group;
  mb = first_m + in_group % rows;
  nb = in_group / rows;
}
#endif  // FP8GEMM_SM90A

template <Elem E, int NC, int BN>
__global__ void __launch_bounds__(Config<E, NC, BN>::kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                const __grid_constant__ CUtensorMap map_as, const Params p) {
#ifdef FP8GEMM_SM90A
  using C = Config<E, NC, BN>;
  constexpr int BM = C::BM, kSub = C::kSub, kAcc = C::kAcc;
  constexpr int kSteps = kQuant / ElemInfo<E>::kWgmmaK;  // wgmma per 128-K block
  constexpr int kStepsPerSub = kSteps / kSub;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int S = p.stages;
  uint8_t *tiles = smem;                                                    // S x (A | B)
  float *scales = reinterpret_cast<float *>(smem + S * (C::kABytes + C::kBBytes));  // S x BM
  uint64_t *full = reinterpret_cast<uint64_t *>(scales + S * BM);
  uint64_t *empty = full + S;
  int *split_flag = reinterpret_cast<int *>(empty + S);

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int total_units = p.num_m * p.num_n * p.splits;
  const int kb_per_split = (p.KB + p.splits - 1) / p.splits;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], NC * 4);  // lane 0 of every consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    prefetch_map(&map_a);
    prefetch_map(&map_b);
    prefetch_map(&map_as);
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread walks the same unit sequence as the consumers and keeps the ring full.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      int it = 0;
      for (int unit = blockIdx.x; unit < total_units; unit += gridDim.x) {
        int mb, nb, split;
        unit_coords(p, unit, mb, nb, split);
        const int kb0 = split * kb_per_split, kb1 = min(p.KB, kb0 + kb_per_split);
        for (int kb = kb0; kb < kb1; ++kb, ++it) {
          const int s = it % S;
          mbar_wait(&empty[s], ((it / S) & 1) ^ 1);
          mbar_expect_tx(&full[s], C::kStageBytes);
          uint8_t *a_dst = tiles + s * (C::kABytes + C::kBBytes);
          uint8_t *b_dst = a_dst + C::kABytes;
#pragma unroll
          for (int sub = 0; sub < kSub; ++sub) {
            const int k_elem = kb * kQuant + sub * (kQuant / kSub);
            tma_load_2d(a_dst + sub * BM * kRowBytes, &map_a, &full[s], k_elem, mb * BM);
            tma_load_2d(b_dst + sub * BN * kRowBytes, &map_b, &full[s], k_elem, nb * BN);
          }
          tma_load_2d(scales + s * BM, &map_as, &full[s], mb * BM, kb);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;  // consumer index: rows [cw*64, cw*64+64) of the tile
    const int warp = tid / 32, lane = tid % 32;
    const int row_in_tile = cw * 64 + warp * 16 + lane / 4;  // and +8
    const int col_in_tile = (lane % 4) * 2;                  // + 8*j
    const int NB = (p.N + kQuant - 1) / kQuant;
    float acc[kAcc], res[kAcc];
    int it = 0;
    for (int unit = blockIdx.x; unit < total_units; unit += gridDim.x) {
      int mb, nb, split;
      unit_coords(p, unit, mb, nb, split);
      const int kb0 = split * kb_per_split, kb1 = min(p.KB, kb0 + kb_per_split);
      const int n0 = nb * BN;
      // A tile spans at most two b_scale blocks (BN <= 192 and n0 % 128 in {0, 64}); columns from `hi_from`
      // on take the second one.
      const int nblk_lo = n0 / kQuant, nblk_hi = min(nblk_lo + 1, NB - 1);
      const int hi_from = (nblk_lo + 1) * kQuant - n0;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) res[i] = 0.f;
      for (int kb = kb0; kb < kb1; ++kb, ++it) {
        const int s = it % S;
        const float sb_lo = __ldg(p.b_scale + nblk_lo * p.bs_s0 + kb * p.bs_s1);
        const float sb_hi = __ldg(p.b_scale + nblk_hi * p.bs_s0 + kb * p.bs_s1);
        mbar_wait(&full[s], (it / S) & 1);
        // A's scales are read now, long before this stage is released: read after the wgmma wait, they were
        // seen overwritten by the stage's next TMA on large grids (bench/results/fp8-gemm-h200.md).
        float sa0 = scales[s * BM + row_in_tile], sa1 = scales[s * BM + row_in_tile + 8];
        asm volatile("" : "+f"(sa0), "+f"(sa1)::"memory");
        const uint8_t *a_src = tiles + s * (C::kABytes + C::kBBytes) + cw * 64 * kRowBytes;
        const uint8_t *b_src = tiles + s * (C::kABytes + C::kBBytes) + C::kABytes;
        fence_regs(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int step = 0; step < kSteps; ++step) {
          const int sub = step / kStepsPerSub, off = (step % kStepsPerSub) * 32;
          Wgmma<E, BN>::run(acc, smem_desc(a_src + sub * BM * kRowBytes + off),
                            smem_desc(b_src + sub * BN * kRowBytes + off), step > 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        fence_regs(acc);
        sa0 *= p.scale_mul, sa1 *= p.scale_mul;
        asm volatile("" : "+f"(sa0), "+f"(sa1)::"memory");  // the loads have returned before the release
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
        const float s0_lo = sa0 * sb_lo, s0_hi = sa0 * sb_hi, s1_lo = sa1 * sb_lo, s1_hi = sa1 * sb_hi;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const bool hi = j * 8 >= hi_from;
          const float f0 = hi ? s0_hi : s0_lo, f1 = hi ? s1_hi : s1_lo;
          res[4 * j + 0] = fmaf(acc[4 * j + 0], f0, res[4 * j + 0]);
          res[4 * j + 1] = fmaf(acc[4 * j + 1], f0, res[4 * j + 1]);
          res[4 * j + 2] = fmaf(acc[4 * j + 2], f1, res[4 * j + 2]);
          res[4 * j + 3] = fmaf(acc[4 * j + 3], f1, res[4 * j + 3]);
        }
      }

      const int tile = unit / p.splits;
      if (p.splits > 1) {
        // Every split stores its FP32 partial (in register order, so the reads below are coalesced); the last
        // to arrive sums them and writes bf16. No CTA waits on another, so any schedule completes.
        float4 *slot = reinterpret_cast<float4 *>(p.workspace) +
                       (size_t(unit) * NC * 128 + (cw * 128 + tid)) * (kAcc / 4);
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i)
          slot[i] = make_float4(res[4 * i], res[4 * i + 1], res[4 * i + 2], res[4 * i + 3]);
        __threadfence();
        consumer_sync(NC * 128);
        if (threadIdx.x == 128) {
          const int arrived = atomicAdd(&p.counters[tile], 1);
          const int last = arrived == p.splits - 1;
          if (last) p.counters[tile] = 0;  // ready for the next launch
          *split_flag = last;
        }
        consumer_sync(NC * 128);
        const bool last = *split_flag != 0;
        consumer_sync(NC * 128);  // the flag is rewritten by the next unit
        if (!last) continue;
        __threadfence();
        for (int other = 0; other < p.splits; ++other) {
          if (other == split) continue;
          const float4 *peer = reinterpret_cast<const float4 *>(p.workspace) +
                               (size_t(tile * p.splits + other) * NC * 128 + (cw * 128 + tid)) * (kAcc / 4);
#pragma unroll
          for (int i = 0; i < kAcc / 4; ++i) {
            const float4 v = __ldcg(peer + i);
            res[4 * i] += v.x, res[4 * i + 1] += v.y, res[4 * i + 2] += v.z, res[4 * i + 3] += v.w;
          }
        }
      }

      // Epilogue: bf16 pairs straight from registers; rows/cols past M/N are dropped.
      const int m_lo = mb * BM + row_in_tile, m_hi = m_lo + 8;
      const bool pairs = (p.N % 2) == 0;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int n = n0 + j * 8 + col_in_tile;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = h ? m_hi : m_lo;
          if (m >= p.M || n >= p.N) continue;
          __nv_bfloat16 *dst = p.c + size_t(m) * p.N + n;
          const float v0 = res[4 * j + 2 * h], v1 = res[4 * j + 2 * h + 1];
          if (pairs) {
            *reinterpret_cast<__nv_bfloat162 *>(dst) = __floats2bfloat162_rn(v0, v1);
          } else {
            dst[0] = __float2bfloat16_rn(v0);
            if (n + 1 < p.N) dst[1] = __float2bfloat16_rn(v1);
          }
        }
      }
    }
  }
#else
  __trap();  // host dispatch only launches this on sm_90a builds
#endif
}

}  // namespace fp8gemm::sm90
