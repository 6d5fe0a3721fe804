// How fast one SM can pull GEMM operand tiles from L2/DRAM into shared memory with TMA, with no math: the
// fp8-gemm kernel's producer loop (a ring of stages, one A box and one B box per 128-K block, mbarrier
// handshakes) with a consumer warp that releases each stage as soon as it lands. Varies the CTA count, the
// tile rows per stage, the ring depth, the box height and the L2 promotion, and prints GB/s per CTA.
//
//   nvcc -O2 -std=c++17 -arch=sm_90a -o tma_ingest bench/tma_ingest.cu && ./tma_ingest
#include <cstdint>

#include "cuda_bench.h"

struct Job {
  int rows_a, rows_b;  // tile rows per stage
  int box_rows;        // rows per TMA box (a divisor of both)
  int stages, kblocks;
  int tiles_m;         // CTA i reads A tile i % tiles_m and B tile i / tiles_m
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t phase) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(smem_u32(b)),
      "r"(phase)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load(const CUtensorMap *map, void *dst, uint64_t *bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y)
      : "memory");
}

__global__ void __launch_bounds__(64) ingest(const __grid_constant__ CUtensorMap ma,
                                             const __grid_constant__ CUtensorMap mb, Job j) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[16], empty[16];
  // 128-byte swizzled boxes want 1024-byte aligned destinations (the launch adds 1 KB of slack)
  uint8_t *smem = smem_raw + ((1024 - smem_u32(smem_raw) % 1024) % 1024);
  const int stage_bytes = (j.rows_a + j.rows_b) * 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < j.stages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tm = blockIdx.x % j.tiles_m, tn = blockIdx.x / j.tiles_m;
  if (threadIdx.x == 0) {  // producer
    for (int kb = 0; kb < j.kblocks; ++kb) {
      const int s = kb % j.stages;
      if (kb >= j.stages) mbar_wait(&empty[s], ((kb / j.stages) - 1) & 1);
      mbar_expect(&full[s], stage_bytes);
      uint8_t *st = smem + s * stage_bytes;
      for (int r = 0; r < j.rows_a; r += j.box_rows)
        tma_load(&ma, st + r * 128, &full[s], kb * 128, tm * j.rows_a + r);
      for (int r = 0; r < j.rows_b; r += j.box_rows)
        tma_load(&mb, st + (j.rows_a + r) * 128, &full[s], kb * 128, tn * j.rows_b + r);
    }
  } else if (threadIdx.x == 32) {  // consumer: release each stage as it lands
    for (int kb = 0; kb < j.kblocks; ++kb) {
      const int s = kb % j.stages;
      mbar_wait(&full[s], (kb / j.stages) & 1);
      mbar_arrive(&empty[s]);
    }
  }
}

// A by 16-byte cp.async from 96 threads (the 128-byte swizzle applied by hand), B by TMA: both paths into the
// SM at once.
__global__ void __launch_bounds__(160) ingest_mixed(const uint8_t *a, int lda, const __grid_constant__ CUtensorMap mb,
                                                    Job j) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[16], empty[16];
  uint8_t *smem = smem_raw + ((1024 - smem_u32(smem_raw) % 1024) % 1024);
  const int stage_bytes = (j.rows_a + j.rows_b) * 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < j.stages; ++s) mbar_init(&full[s], 1 + 96), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tm = blockIdx.x % j.tiles_m, tn = blockIdx.x / j.tiles_m;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int kb = 0; kb < j.kblocks; ++kb) {
      const int s = kb % j.stages;
      if (kb >= j.stages) mbar_wait(&empty[s], ((kb / j.stages) - 1) & 1);
      mbar_expect(&full[s], j.rows_b * 128);
      uint8_t *st = smem + s * stage_bytes;
      for (int r = 0; r < j.rows_b; r += j.box_rows)
        tma_load(&mb, st + (j.rows_a + r) * 128, &full[s], kb * 128, tn * j.rows_b + r);
    }
  } else if (warp >= 1 && warp <= 3) {
    const int t = threadIdx.x - 32;
    const uint8_t *src = a + size_t(tm) * j.rows_a * lda;
    for (int kb = 0; kb < j.kblocks; ++kb) {
      const int s = kb % j.stages;
      if (kb >= j.stages) mbar_wait(&empty[s], ((kb / j.stages) - 1) & 1);
      const uint32_t st = smem_u32(smem + s * stage_bytes);
      for (int c = t; c < j.rows_a * 8; c += 96) {
        const int r = c / 8, ch = c % 8;
        const uint32_t dst = st + r * 128 + ((ch ^ (r % 8)) * 16);
        const uint8_t *from = src + size_t(r) * lda + kb * 128 + ch * 16;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(from) : "memory");
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(smem_u32(&full[s])) : "memory");
    }
  } else if (warp == 4 && threadIdx.x % 32 == 0) {
    for (int kb = 0; kb < j.kblocks; ++kb) {
      const int s = kb % j.stages;
      mbar_wait(&full[s], (kb / j.stages) & 1);
      mbar_arrive(&empty[s]);
    }
  }
}

int main() {
  CHECK(cudaFree(nullptr));
  const auto encode = tensor_map_encoder();
  const int K = 7168, M = 6144, N = 6144;
  uint8_t *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, size_t(M) * K));
  CHECK(cudaMalloc(&b, size_t(N) * K));
  CHECK(cudaMemset(a, 1, size_t(M) * K));
  CHECK(cudaMemset(b, 1, size_t(N) * K));
  auto map = [&](void *base, int rows, int box_rows, CUtensorMapL2promotion promo) {
    CUtensorMap m;
    const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)}, strides[1] = {cuuint64_t(K)};
    const cuuint32_t box[2] = {128, cuuint32_t(box_rows)}, estr[2] = {1, 1};
    if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      std::exit(2);
    return m;
  };
  CHECK(cudaFuncSetAttribute(ingest, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024));
  CHECK(cudaFuncSetAttribute(ingest_mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  auto run = [&](const char *label, int ctas, Job j, CUtensorMapL2promotion promo, bool mixed = false) {
    const CUtensorMap ma = map(a, M, j.box_rows, promo), mb = map(b, N, j.box_rows, promo);
    const int smem = j.stages * (j.rows_a + j.rows_b) * 128 + 1024;
    float best = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      CHECK(cudaEventRecord(e0));
      if (mixed) ingest_mixed<<<ctas, 160, smem>>>(a, K, mb, j);
      else ingest<<<ctas, 64, smem>>>(ma, mb, j);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best = ms < best ? ms : best;
    }
    const double bytes = double(j.rows_a + j.rows_b) * 128 * j.kblocks;
    std::printf("%-34s ctas %3d  rows %3d+%3d box %3d stages %d: %7.1f us  %6.1f GB/s per CTA  %6.2f TB/s total\n",
                label, ctas, j.rows_a, j.rows_b, j.box_rows, j.stages, best * 1e3, bytes / (best * 1e-3) / 1e9,
                bytes * ctas / (best * 1e-3) / 1e12);
  };
  const auto P256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, PNONE = CU_TENSOR_MAP_L2_PROMOTION_NONE,
             P128 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  const int KB = K / 128;
  struct Case {
    const char *label;
    int ctas;
    Job job;  // rows_a, rows_b, box_rows, stages, kblocks, tiles_m
    CUtensorMapL2promotion promo;
    bool mixed;  // A by cp.async
  };
  const Case cases[] = {
      {"128x128 tile, 5 stages", 1, {128, 128, 128, 5, KB, 8}, P256, false},
      {"128x128 tile, 5 stages", 12, {128, 128, 128, 5, KB, 8}, P256, false},
      {"128x128 tile, 5 stages", 96, {128, 128, 128, 5, KB, 8}, P256, false},
      {"128x128 tile, 5 stages", 132, {128, 128, 128, 5, KB, 8}, P256, false},
      {"128x128, 6 stages", 12, {128, 128, 128, 6, KB, 8}, P256, false},
      {"128x128, 3 stages", 12, {128, 128, 128, 3, KB, 8}, P256, false},
      {"128x128, 64-row boxes", 12, {128, 128, 64, 5, KB, 8}, P256, false},
      {"128x128, 32-row boxes", 12, {128, 128, 32, 5, KB, 8}, P256, false},
      {"128x128, promotion none", 12, {128, 128, 128, 5, KB, 8}, PNONE, false},
      {"128x128, promotion 128B", 12, {128, 128, 128, 5, KB, 8}, P128, false},
      {"128x128, 64-row boxes, 6 stages", 12, {128, 128, 64, 6, KB, 8}, P256, false},
      {"256x128 tile, 4 stages", 12, {256, 128, 128, 4, KB, 8}, P256, false},
      {"256x128 tile, 4 stages", 132, {256, 128, 128, 4, KB, 24}, P256, false},
      {"128x96", 12, {128, 96, 32, 6, KB, 8}, P256, false},
      {"64x64, 8 stages", 12, {64, 64, 64, 8, KB, 8}, P256, false},
      {"B 64x64 only, 8 stages", 12, {0, 64, 64, 8, KB, 8}, P256, false},
      {"B 128x128 only, 5 stages", 12, {0, 128, 128, 5, KB, 8}, P256, false},
      {"A cp.async + B TMA, 128x128", 1, {128, 128, 128, 5, KB, 8}, P256, true},
      {"A cp.async + B TMA, 128x128", 12, {128, 128, 128, 5, KB, 8}, P256, true},
      {"A cp.async + B TMA, 128x128", 132, {128, 128, 128, 5, KB, 8}, P256, true},
      {"A cp.async + B TMA, 256x128", 12, {256, 128, 128, 4, KB, 8}, P256, true},
      {"A cp.async + B TMA, 256x128", 132, {256, 128, 128, 4, KB, 24}, P256, true},
      {"A cp.async only 128 rows", 12, {128, 0, 128, 5, KB, 8}, P256, true},
      {"B 128x128 only, stages", 12, {0, 128, 128, 1, KB, 8}, P256, false},
      {"B 128x128 only, stages", 12, {0, 128, 128, 2, KB, 8}, P256, false},
      {"B 128x128 only, stages", 12, {0, 128, 128, 3, KB, 8}, P256, false},
      {"B 128x128 only, stages", 12, {0, 128, 128, 5, KB, 8}, P256, false},
      {"B 128x128 only, 1 block (launch)", 12, {0, 128, 128, 1, 1, 8}, P256, false},
      {"128x128, 3 stages, 1 CTA per SM", 132, {128, 128, 128, 3, KB, 8}, P256, false},
      {"128x128, 3 stages, 2 CTAs per SM", 264, {128, 128, 128, 3, KB, 8}, P256, false},
      {"128x128, 2 stages, 3 CTAs per SM", 396, {128, 128, 128, 2, KB, 8}, P256, false},
  };
  for (const Case &c : cases) run(c.label, c.ctas, c.job, c.promo, c.mixed);
  return 0;
}
