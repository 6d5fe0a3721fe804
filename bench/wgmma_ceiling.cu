// What the fp8-gemm consumers' per-128-K-block pattern costs on the tensor cores: every CTA (one per SM) runs the
// kernel's wgmma pattern for 2048 128-K blocks per wave on random e4m3 (or f16) tiles in shared memory.
// Patterns:
//   chain      the block's wgmma into one accumulator that is never waited on (the ceiling)
//   promote    the kernel's loop with no loads: fresh accumulator, wgmma.wait_group 0, res += acc * factor
//   halves     ring, with each consumer's accumulator split into two N halves (no more registers) and
//              software-pipelined: one half's wgmma stay queued while the other half is promoted
//   ring       promote, with the kernel's ring of stages: a producer thread waits for each free stage and
//              fills it (TMA of A and/or B, or into a scratch stage the wgmma do not read, or nothing but the
//              mbarrier handshake), the consumers wait for it and release it
//   ring+staggered  ring, consumer c starting c / NC of a block's tensor time late (the steady state does
//              not keep the offset: same cycles as ring)
//   units      ring for strict mode's three-consumer tile: res rescaled, then the block's wgmma accumulate
//              into it (no fresh accumulator, no promotion); "+scales": the rescale factor worked out as the
//              kernel does (two scales read from the stage, selects, rcp.approx) on the way to the wgmma;
//              "+tiles": also a tile's end every 56 blocks (bf16 results stored from registers, by every SM at
//              once, and res reset: more than the kernel's TMA-store epilogue costs)
// Instructions: e4m3 m64nNk32 (fast mode), f16 m64nNk16 from shared memory ("ss"), or with A from registers
// ("rs": e4m3 rows, ldmatrix and widened per pair of steps, as strict mode's kF16A kernels). W = 2: each consumer
// does two 64-row waves per block (the 256x128 tile), one accumulator in flight.
// Prints cycles per block (clock64 on each consumer, median over CTAs) against the tensor-core time of the
// block's MACs (4096 e4m3 or 2048 f16 MAC per cycle per SM), and the SM clock implied by the launch's event time.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels/fp8-gemm/gemm_cuda \
//     -o wgmma_ceiling bench/wgmma_ceiling.cu && ./wgmma_ceiling [pattern|all] [kblocks]
// kblocks: the 128-K blocks the loads cycle through (56: L2-resident operands; 448: streamed from DRAM).
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <vector>

#include "cuda_bench.h"
#include "gemm_sm90.cuh"

using namespace fp8gemm::sm90;

enum Pattern { kChain, kPromote, kHalves, kRing, kUnits, kUnitsScaled, kUnitsTiled, kRingStaggered };
constexpr const char *kPatternNames[] = {"chain",        "promote",     "halves",        "ring", "units",
                                         "units+scales", "units+tiles", "ring+staggered"};
// The tensor-core instruction: fast mode's e4m3 k32 (A and B from shared memory), or strict mode's f16 k16 with
// both from shared memory (f16 tiles) or A from registers (e4m3 rows, ldmatrix and widened per pair of steps
// as the kF16A kernel does).
enum Mma { kFp8, kF16SS, kF16RS };
constexpr const char *kMmaNames[] = {"e4m3", "f16 ss", "f16 rs"};
// ring: what the producer loads into each stage (bits)
enum Load { kLoadNone = 0, kLoadA = 1, kLoadB = 2, kLoadScratch = 4 };
constexpr int kMaxRingStages = 4;

template <int NC, int BN, int W, int P, int M>
struct Ceiling {
  static constexpr int kProducer = P != kChain && P != kPromote;  // a warpgroup whose thread 0 is producer
  static constexpr int kThreads = 128 * (NC + kProducer);
  static constexpr int kRows = NC * W * 64;       // A rows; f16 tiles are two 128-byte atoms per 128 K:
  static constexpr int kABytes = kRows * kRowBytes * (M == kF16SS ? 2 : 1);
  static constexpr int kBBytes = BN * kRowBytes * (M == kFp8 ? 1 : 2);
  // ring: kRingStages stages and a scratch one (the target of kLoadScratch)
  static constexpr int kRingStages = std::min(kMaxRingStages, (232448 - 1024 - 64) / (kABytes + kBBytes) - 1);
  static constexpr int kStages = kProducer ? kRingStages + 1 : 1;
  static constexpr int kSmem = 1024 + kStages * (kABytes + kBBytes) + 2 * kMaxRingStages * 8;
  static constexpr int kAcc = BN / 2;
  // ring: the kernel's register split (setmaxnreg) between the producer warpgroup and the consumers
  static_assert(!kProducer || NC <= 3, "ring: one to three consumers");
  static constexpr bool kRescales = P == kUnits || P == kUnitsScaled || P == kUnitsTiled;  // the units scheme
  static_assert(!kRescales || M == kF16RS, "units: the three-consumer strict kernel's scheme");
  static constexpr double kIdealCycles = double(NC) * W * 64 * BN * kQuant / (M == kFp8 ? 4096 : 2048);
};

#ifdef FP8GEMM_SM90A
// One 128-K block of one 64-row wave into `acc` (one commit group). `a` / `b`: the wave's A rows and B in shared
// memory; f16 tiles keep K 64-127 in a second atom `a_atom` / `b_atom` bytes on.
template <int BN, int M>
__device__ __forceinline__ void issue_block(float (&acc)[BN / 2], uint32_t a, uint32_t a_atom, uint32_t b,
                                            uint32_t b_atom, bool fresh) {
  fence_regs(acc);
  if constexpr (M == kF16RS) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
    uint32_t raw[4][4], fa[8][4];
    ldsm_a_e4m3(raw, a + warp * 16 * kRowBytes, lane);
#pragma unroll
    for (int step = 0; step < 8; ++step) {
      if (step % 2 == 0) {
        widen_a_pair(raw[step / 2], fa[step], fa[step + 1]);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      }
      WgmmaRegA<BN>::run(acc, fa[step], smem_desc(b + (step / 4) * b_atom + (step % 4) * 32), !fresh || step > 0);
    }
  } else {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    constexpr int kSteps = M == kFp8 ? 4 : 8;
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      const uint32_t off = (step % 4) * 32;
      const uint64_t da = smem_desc(a + (step / 4) * a_atom + off), db = smem_desc(b + (step / 4) * b_atom + off);
      if constexpr (M == kFp8) Wgmma<Elem::kE4M3, BN>::run(acc, da, db, !fresh || step > 0);
      else Wgmma<Elem::kF16, BN>::run(acc, da, db, !fresh || step > 0);
    }
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int R>
__device__ __forceinline__ void promote_into(float (&res)[R], float (&acc)[R], float factor) {
  fence_regs(acc);
#pragma unroll
  for (int i = 0; i < R; ++i) res[i ^ 1] = fmaf(acc[i], factor, res[i ^ 1]);  // swapped pairs, as the kernel
}
#endif

template <int NC, int BN, int W, int P, int M>
__global__ void __launch_bounds__(Ceiling<NC, BN, W, P, M>::kThreads, 1)
    ceiling_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int load,
                   int tiles_m, int tiles_n, int kblocks, int blocks, unsigned long long *cycles, float *sink,
                   uint32_t *epi, int write_sink) {
#ifdef FP8GEMM_SM90A
  using C = Ceiling<NC, BN, W, P, M>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  constexpr int kStageBytes = C::kABytes + C::kBBytes;
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::kStages * kStageBytes), *empty = full + kMaxRingStages;
  // Random finite e4m3 (bits & 0x77: never 0x7F / 0xFF), so the tensor cores switch as in a real GEMM.
  for (int i = threadIdx.x; i < C::kStages * kStageBytes; i += blockDim.x) {
    uint32_t h = (i + 1) * 2654435761u ^ (blockIdx.x * 40503u);
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    smem[i] = uint8_t(h & 0x77);
  }
  if (threadIdx.x == 0)
    for (int s = 0; s < C::kRingStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], NC * 4);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (C::kProducer && wg == NC) {
    if constexpr (NC == 3) asm volatile("setmaxnreg.dec.sync.aligned.u32 32;");
    else if constexpr (NC == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      RingPos pos;
      const int tm = blockIdx.x % tiles_m, tn = blockIdx.x / tiles_m % tiles_n;
      const int bytes = (load & kLoadA ? C::kABytes : 0) + (load & kLoadB ? C::kBBytes : 0);
      for (int b = 0; b < blocks; ++b) {
        mbar_wait(&empty[pos.slot], pos.phase ^ 1);
        uint64_t *bar = &full[pos.slot];
        uint8_t *dst = smem + (load & kLoadScratch ? C::kRingStages : pos.slot) * kStageBytes;
        const int kb = b % kblocks;
        if (bytes == 0) {
          mbar_arrive(bar);
        } else {
          mbar_expect_tx(bar, bytes);
          if (load & kLoadA) tma_load_2d(dst, &map_a, bar, kb * kQuant, tm * NC * W * 64);
          if (load & kLoadB)  // f16 B: two 128-byte atoms per 128 K
#pragma unroll
            for (int sub = 0; sub < (M == kFp8 ? 1 : 2); ++sub)
              tma_load_2d(dst + C::kABytes + sub * BN * kRowBytes, &map_b, bar,
                          (kb * (M == kFp8 ? 1 : 2) + sub) * kQuant, tn * BN);
        }
        pos.advance(C::kRingStages);
      }
    }
    return;
  }
  if constexpr (C::kProducer && NC == 3) asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
  else if constexpr (C::kProducer && NC == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const uint32_t smem_base = smem_u32(smem);
  // Shared-memory addresses of a stage's B and of wave w's A rows; their second atoms (f16) follow each tile.
  auto b_at = [&](int slot) { return smem_base + slot * kStageBytes + C::kABytes; };
  auto a_at = [&](int slot, int w) { return smem_base + slot * kStageBytes + (wg * W + w) * 64 * kRowBytes; };
  constexpr uint32_t kAAtom = C::kRows * kRowBytes, kBAtom = BN * kRowBytes;
  auto issue = [&](float(&a)[C::kAcc], int slot, int w, bool fresh) __attribute__((always_inline)) {
    issue_block<BN, M>(a, a_at(slot, w), kAAtom, b_at(slot), kBAtom, fresh);
  };
  const float factor = 1.f + 1e-7f * float(threadIdx.x);
  float acc[C::kAcc], res[W][C::kAcc], unit[2] = {1.f, 1.f};
#pragma unroll
  for (int w = 0; w < W; ++w)
#pragma unroll
    for (int i = 0; i < C::kAcc; ++i) res[w][i] = 0.f, acc[i] = 0.f;
  RingPos pos;
  if constexpr (P == kRingStaggered) {  // consumer c starts c / NC of a block's tensor time late
    const long long t0 = clock64(), wait = (long long)(C::kIdealCycles * wg / NC);
    while (clock64() - t0 < wait) {
    }
  }
  const unsigned long long start = clock64();
  if constexpr (P == kChain) {
    for (int b = 0; b < blocks; ++b) {
#pragma unroll
      for (int w = 0; w < W; ++w) issue(acc, 0, w, false);
      asm volatile("wgmma.wait_group.sync.aligned 2;" ::: "memory");  // bounded groups in flight
    }
  } else if constexpr (P == kHalves) {
    static_assert(W == 1 && M == kFp8, "halves: one wave, e4m3");
    constexpr int kHalf = BN / 2;  // wgmma width; its accumulator has kHalf / 2 floats
    float acc0[kHalf / 2], acc1[kHalf / 2], res0[kHalf / 2] = {}, res1[kHalf / 2] = {};
    auto issue_half = [&](float(&a)[kHalf / 2], int h, int slot) __attribute__((always_inline)) {
      issue_block<kHalf, M>(a, a_at(slot, 0), kAAtom, b_at(slot) + h * kHalf * kRowBytes, kBAtom, true);
    };
    // Half-blocks as one stream (item k: block k / 2, half k % 2), in the shape of the kernel's double-buffered
    // loop (two items per iteration, the tail apart): other loop shapes made ptxas serialize every wgmma.
    const int n = 2 * blocks;
    int i = 0, cur = pos.slot;
    mbar_wait(&full[cur], pos.phase);
    issue_half(acc0, 0, cur);
    for (; i + 2 < n; i += 2) {
      issue_half(acc1, 1, cur);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // half 0 of this block done
      promote_into(res0, acc0, factor);
      pos.advance(C::kRingStages);
      mbar_wait(&full[pos.slot], pos.phase);
      issue_half(acc0, 0, pos.slot);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // half 1 of this block done
      __syncwarp();
      mbar_arrive_if(&empty[cur], tid % 32 == 0);
      promote_into(res1, acc1, factor);
      cur = pos.slot;
    }
    if (i + 1 < n) {  // always (n is even); the shape ptxas needs
      issue_half(acc1, 1, cur);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      promote_into(res0, acc0, factor);
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      __syncwarp();
      mbar_arrive_if(&empty[cur], tid % 32 == 0);
      promote_into(res1, acc1, factor);
    } else {
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      promote_into(res0, acc0, factor);
    }
    pos.advance(C::kRingStages);
#pragma unroll
    for (int i = 0; i < kHalf / 2; ++i) res[0][i] = res0[i] + res1[i];
  } else {
    for (int b = 0; b < blocks; ++b) {
      if constexpr (C::kProducer) mbar_wait(&full[pos.slot], pos.phase);
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const int slot = C::kProducer ? pos.slot : 0;
        if constexpr (C::kRescales) {  // res from the previous block's scale units to this one's, then accumulate
          float ratio[2] = {factor, factor};
          if constexpr (P != kUnits) {  // two stand-in scales from the stage, then the kernel's arithmetic
            const uint32_t at = b_at(slot) + (tid % 32) * 4;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float sc = lds_f32(at + 128 * h) * factor;
              const float held = select_f32(fabsf(sc) < 0x1p-64f, copysignf(0x1p-64f, sc), sc);
              const float next = select_f32(sc == 0.f, unit[h], held);
              ratio[h] = unit[h] * rcp_approx(next);
              unit[h] = next;
            }
          }
          fence_regs(res[w]);
#pragma unroll
          for (int i = 0; i < C::kAcc; ++i) res[w][i] *= ratio[(i >> 1) & 1];
          issue(res[w], slot, w, false);
        } else {
          issue(acc, slot, w, true);
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        if constexpr (C::kProducer) {
          if (w == W - 1) {
            __syncwarp();
            if (tid % 32 == 0) mbar_arrive(&empty[pos.slot]);
          }
        }
        if constexpr (!C::kRescales) promote_into(res[w], acc, factor);
        if constexpr (P == kUnitsTiled) {
          if (b % 56 == 55) {  // a tile's end: its bf16 results out, a fresh result
            uint32_t *to = epi + ((blockIdx.x * NC + wg) * C::kAcc / 2) * 128 + tid;
#pragma unroll
            for (int i = 0; i < C::kAcc; i += 2) {
              const float u = unit[(i >> 1) & 1];
              const __nv_bfloat162 v = __floats2bfloat162_rn(res[w][i] * u, res[w][i + 1] * u);
              to[i / 2 * 128] = *reinterpret_cast<const uint32_t *>(&v);
              res[w][i] = res[w][i + 1] = 0.f;
            }
            unit[0] = unit[1] = 1.f;
          }
        }
      }
      pos.advance(C::kRingStages);
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  const unsigned long long end = clock64();
  if (tid == 0) cycles[blockIdx.x * NC + wg] = end - start;
  if (write_sink) {  // never at run time: keeps the promotions live
    float s = acc[0];
#pragma unroll
    for (int w = 0; w < W; ++w)
#pragma unroll
      for (int i = 0; i < C::kAcc; ++i) s += res[w][i];
    sink[threadIdx.x] = s;
  }
#endif
}

// Operands the ring loads: 12 x 11 tiles (one per CTA of 132), each CTA cycling through `kblocks` 128-K blocks:
// 56 (K = 7168) keeps them L2-resident together (~37 MB with f16 B), 448 streams them from DRAM (each block
// read by the 11 or 12 CTAs that share it, as in a GEMM).
constexpr int kTilesM = 12, kTilesN = 11;
struct Operands {
  uint8_t *a, *b;  // A e4m3, B e4m3 or f16: rows of kblocks * 128 elements
  uint32_t *epi;   // units+tiles: each consumer's bf16 results
  int kblocks;
};

CUtensorMap operand_map(void *base, int rows, int row_bytes, int box_rows) {
  static const auto encode = tensor_map_encoder();
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(row_bytes), cuuint64_t(rows)}, strides[1] = {cuuint64_t(row_bytes)};
  const cuuint32_t box[2] = {128, cuuint32_t(box_rows)}, estr[2] = {1, 1};
  if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    std::exit(1);
  }
  return m;
}

const char *g_only = nullptr;  // argv[1]: run only the patterns whose name starts with it

template <int NC, int BN, int W, int P, int M = kFp8>
void measure(int sms, int blocks, const Operands &ops, int load = kLoadNone) {
  using C = Ceiling<NC, BN, W, P, M>;
  if (g_only && std::strncmp(kPatternNames[P], g_only, std::strlen(g_only)) != 0) return;
  if (load & kLoadA && M == kF16SS) std::exit(3);  // the producer's A boxes are e4m3 tiles
  const int k = ops.kblocks * kQuant;
  const CUtensorMap ma = operand_map(ops.a, kTilesM * C::kRows, k, C::kRows),
                    mb = operand_map(ops.b, kTilesN * BN, k * (M == kFp8 ? 1 : 2), BN);
  auto kernel = ceiling_kernel<NC, BN, W, P, M>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
  unsigned long long *cycles;
  float *sink;
  CHECK(cudaMalloc(&cycles, sizeof(unsigned long long) * sms * NC));
  CHECK(cudaMalloc(&sink, sizeof(float) * C::kThreads));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<double> per_block, clocks;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(e0));
    kernel<<<sms, C::kThreads, C::kSmem>>>(ma, mb, load, kTilesM, kTilesN, ops.kblocks, blocks, cycles, sink,
                                           ops.epi, 0);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<unsigned long long> c(sms * NC);
    CHECK(cudaMemcpy(c.data(), cycles, sizeof(unsigned long long) * c.size(), cudaMemcpyDeviceToHost));
    std::sort(c.begin(), c.end());
    const double median = double(c[c.size() / 2]);
    if (rep > 0) per_block.push_back(median / blocks), clocks.push_back(double(c.back()) / (ms * 1e3));
  }
  std::sort(per_block.begin(), per_block.end());
  std::sort(clocks.begin(), clocks.end());
  const double cyc = per_block[per_block.size() / 2];
  const char *loads[] = {"", "A", "B", "AB", "-", "A>scratch", "B>scratch", "AB>scratch"};
  std::printf("%-6s %-8s %-10s nc=%d bn=%-3d w=%d s=%d  %7.1f cycles/block  ideal %6.1f  %5.1f %%  (~%4.0f MHz)\n",
              kMmaNames[M], kPatternNames[P], C::kProducer ? (load ? loads[load] : "no loads") : "", NC, BN, W,
              C::kProducer ? C::kRingStages : 0, cyc, C::kIdealCycles, 100.0 * C::kIdealCycles / cyc,
              clocks[clocks.size() / 2]);
  CHECK(cudaFree(cycles));
  CHECK(cudaFree(sink));
}

// wgmma_ceiling [pattern|all] [kblocks]
int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "all") != 0) g_only = argv[1];
  Operands ops{};
  ops.kblocks = argc > 2 ? std::atoi(argv[2]) : 56;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount, blocks = 2048;
  std::printf("# %s, %d SMs, %d blocks of 128 K per consumer wave, one CTA per SM; loads cycle through K = %d\n",
              prop.name, sms, blocks, ops.kblocks * kQuant);
  const size_t a_bytes = size_t(kTilesM) * 256 * ops.kblocks * kQuant;
  const size_t b_bytes = 2 * size_t(kTilesN) * 256 * ops.kblocks * kQuant;  // f16 B at most
  CHECK(cudaMalloc(&ops.a, a_bytes));
  CHECK(cudaMalloc(&ops.b, b_bytes));
  CHECK(cudaMemset(ops.a, 0x3a, a_bytes));
  CHECK(cudaMemset(ops.b, 0x35, b_bytes));
  CHECK(cudaMalloc(&ops.epi, size_t(sms) * 3 * 64 * 128 * sizeof(uint32_t)));
  measure<2, 128, 1, kChain>(sms, blocks, ops);
  measure<2, 192, 1, kChain>(sms, blocks, ops);
  measure<1, 128, 1, kPromote>(sms, blocks, ops);
  measure<2, 64, 1, kPromote>(sms, blocks, ops);
  measure<2, 96, 1, kPromote>(sms, blocks, ops);
  measure<2, 128, 1, kPromote>(sms, blocks, ops);
  measure<2, 192, 1, kPromote>(sms, blocks, ops);
  measure<2, 128, 2, kPromote>(sms, blocks, ops);
  measure<3, 128, 1, kPromote>(sms, blocks, ops);
  for (int load : {0, 3}) {  // none; A and B
    measure<2, 128, 1, kHalves>(sms, blocks, ops, load);
    measure<2, 192, 1, kHalves>(sms, blocks, ops, load);
    measure<1, 128, 1, kHalves>(sms, blocks, ops, load);
    measure<2, 128, 1, kRing>(sms, blocks, ops, load);
    measure<2, 128, 2, kRing>(sms, blocks, ops, load);
    measure<2, 192, 1, kRing>(sms, blocks, ops, load);
    measure<3, 128, 1, kRing>(sms, blocks, ops, load);
    measure<2, 128, 1, kRingStaggered>(sms, blocks, ops, load);
    measure<2, 128, 2, kRingStaggered>(sms, blocks, ops, load);
    measure<2, 192, 1, kRingStaggered>(sms, blocks, ops, load);
    measure<3, 128, 1, kRingStaggered>(sms, blocks, ops, load);
  }
  // strict mode's 16-bit patterns (no register-A chain: its fragments' registers are rewritten while earlier
  // wgmma may still read them, so ptxas serializes it)
  measure<2, 128, 1, kChain, kF16SS>(sms, blocks, ops);
  measure<2, 128, 1, kRing, kF16SS>(sms, blocks, ops);
  measure<2, 128, 1, kRing, kF16RS>(sms, blocks, ops);
  measure<3, 128, 1, kRing, kF16SS>(sms, blocks, ops);
  measure<2, 192, 1, kRing, kF16RS>(sms, blocks, ops);
  for (int load : {0, 1, 2, 3}) {  // none; A; B; A and B
    measure<2, 128, 1, kRing, kF16RS>(sms, blocks, ops, load);
    measure<3, 128, 1, kUnits, kF16RS>(sms, blocks, ops, load);
    measure<3, 128, 1, kUnitsScaled, kF16RS>(sms, blocks, ops, load);
    measure<3, 128, 1, kUnitsTiled, kF16RS>(sms, blocks, ops, load);
    measure<3, 192, 1, kUnits, kF16RS>(sms, blocks, ops, load);
  }
  return 0;
}
