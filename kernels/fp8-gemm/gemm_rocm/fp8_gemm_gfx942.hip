// Block-scaled FP8 (e4m3fnuz) GEMM for AMD MI300X (gfx942): MFMA 32x32x16 FP8, FP32 promotion per 128-K block.
//
// c[m,n] = sum_kb a_scale[m,kb] * b_scale[n/128,kb] * sum_{k in kb} a[m,k] * b[n,k]   (c is bf16, row-major)
// a [M,K] and b [N,K] are K-major (row stride lda/ldb, unit K stride); K must be a multiple of 128.
// Tile: 128x128 per 256-thread block (4 waves, each a 64x64 quadrant = 2x2 MFMA 32x32 tiles), BK = 128 = the
// quant block, so each K-tile's MFMA partial sums are scaled once and folded into persistent FP32 accumulators.
#include "hip_shim.h"

namespace kf {

constexpr int BM = 128, BN = 128, BK = 128;
constexpr int LDS_PAD = 8;  // +8 bytes per row breaks the 128-byte stride that would hit one LDS bank group
constexpr int LDS_ROW = BK + LDS_PAD;
constexpr int THREADS = 256;
constexpr int WAVE = 64;

typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef unsigned int u32x4 __attribute__((ext_vector_type(4)));

// Round-to-nearest-even fp32 -> bf16 bits; NaN stays NaN.
__device__ inline unsigned short to_bf16(float x) {
  unsigned int u = __builtin_bit_cast(unsigned int, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

// Copy a 128x128 byte tile (rows row0.., K cols k0..) into LDS with 16-byte vectors; rows past `rows` read as 0.
__device__ inline void load_tile(unsigned char* lds, const unsigned char* g, long ld, int row0, int rows, int k0,
                                 int tid) {
#pragma unroll
  for (int i = 0; i < (BM * BK) / (16 * THREADS); ++i) {
    int idx = tid + i * THREADS;  // 0..1023: 8 vectors per row
    int r = idx >> 3, c = (idx & 7) * 16;
    u32x4 v = {0u, 0u, 0u, 0u};
    if (row0 + r < rows) v = *(const u32x4*)(g + (long)(row0 + r) * ld + k0 + c);
    unsigned int* dst = (unsigned int*)(lds + r * LDS_ROW + c);
    // LDS_ROW is a multiple of 8, not 16, so a 16-byte LDS store could be misaligned: store 4-byte words.
    dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
  }
}

}  // namespace kf

extern "C" __global__ __launch_bounds__(256) void fp8_gemm_blockscaled_gfx942(
    const unsigned char* __restrict__ a, const unsigned char* __restrict__ b, const float* __restrict__ a_scale,
    const float* __restrict__ b_scale, unsigned short* __restrict__ c, int M, int N, int K, long lda, long ldb,
    long as_m, long as_k, long bs_n, long bs_k, long ldc) {
  using namespace kf;
  __shared__ unsigned char lds_a[BM * LDS_ROW];
  __shared__ unsigned char lds_b[BN * LDS_ROW];

  const int tid = KF_TID_X();
  const int lane = tid % WAVE, wave = tid / WAVE;
  const int m0 = KF_BID_Y() * BM, n0 = KF_BID_X() * BN;
  const int wm = (wave >> 1) * 64, wn = (wave & 1) * 64;  // this wave's 64x64 quadrant
  const int nb = n0 / 128;                                // b_scale row: one 128-wide N block per tile

  f32x16 acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) acc[i][j] = (f32x16){};

  // MFMA 32x32x16 operand layout: lane holds 8 consecutive K of row (lane%32), K offset 8*(lane/32).
  const int lrow = lane % 32, lk = (lane / 32) * 8;

  for (int k0 = 0; k0 < K; k0 += BK) {
    load_tile(lds_a, a, lda, m0, M, k0, tid);
    load_tile(lds_b, b, ldb, n0, N, k0, tid);
    __syncthreads();

    f32x16 part[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) part[i][j] = (f32x16){};

#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      long fa[2], fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        fa[i] = *(const long*)(lds_a + (wm + i * 32 + lrow) * LDS_ROW + kk + lk);
        fb[i] = *(const long*)(lds_b + (wn + i * 32 + lrow) * LDS_ROW + kk + lk);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          part[i][j] = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(fa[i], fb[j], part[i][j], 0, 0, 0);
    }

    // FP32 promotion: scale this K block's partial sums by a_scale[m,kb]*b_scale[nb,kb] and accumulate.
    const int kb = k0 / BK;
    const float sb = b_scale[nb * bs_n + kb * bs_k];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        // Output layout of a 32x32 MFMA: element r of lane l is row 8*(r/4) + 4*(l/32) + r%4, column l%32.
        int m = m0 + wm + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + (r % 4);
        float sa = m < M ? a_scale[m * as_m + kb * as_k] : 0.0f;
        float s = sa * sb;
#pragma unroll
        for (int j = 0; j < 2; ++j) acc[i][j][r] += s * part[i][j][r];
      }
    }
    __syncthreads();  // LDS is reused by the next K tile
  }

#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        int m = m0 + wm + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + (r % 4);
        int n = n0 + wn + j * 32 + lrow;
        if (m < M && n < N) c[m * ldc + n] = to_bf16(acc[i][j][r]);
      }
}

#if !defined(__HIP_DEVICE_COMPILE__) && __has_include(<hip/hip_runtime.h>)
// Host launcher (only compiled in a full ROCm build): grid = (ceil(N/128), ceil(M/128)), 256 threads.
extern "C" hipError_t fp8_gemm_rocm_launch(const void* a, const void* b, const float* a_scale, const float* b_scale,
                                           void* c, int M, int N, int K, long lda, long ldb, long as_m, long as_k,
                                           long bs_n, long bs_k, long ldc, hipStream_t stream) {
  if (K % 128 != 0) return hipErrorInvalidValue;
  dim3 grid((N + kf::BN - 1) / kf::BN, (M + kf::BM - 1) / kf::BM);
  hipLaunchKernelGGL(fp8_gemm_blockscaled_gfx942, grid, dim3(kf::THREADS), 0, stream,
                     (const unsigned char*)a, (const unsigned char*)b, a_scale, b_scale, (unsigned short*)c, M, N, K,
                     lda, ldb, as_m, as_k, bs_n, bs_k, ldc);
  return hipGetLastError();
}
#endif
