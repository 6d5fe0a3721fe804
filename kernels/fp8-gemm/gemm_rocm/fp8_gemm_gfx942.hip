// Block-scaled FP8 GEMM for AMD MI300X (gfx942): MFMA 32x32x16 FP8 (e4m3fnuz), FP32 promotion per 128-K block.
//
// c[m,n] = alpha * sum_kb a_scale[m,kb] * b_scale[n/128,kb] * sum_{k in kb} a[m,k] * b[n,k]   (c bf16, row-major)
// a [M,K] and b [N,K] are K-major e4m3fnuz bytes (row stride lda/ldb, unit K stride, rows 16-byte aligned);
// K must be a multiple of 128. float8_e4m3fn inputs are first rewritten by fp8_fn_to_fnuz (same bits, half the
// value), and alpha = 4 undoes the two halvings.
//
// Tile: 128x128 per 256-thread workgroup (4 waves, each a 64x64 quadrant = 2x2 MFMA 32x32 tiles). BK = 128 = the
// quant block, so each K tile's MFMA partial sums are scaled once and folded into persistent FP32 accumulators.
// LDS rows are unpadded and XOR-swizzled by 16-byte chunk (chunk ^ row%8), so the 32 rows one MFMA operand read
// touches spread over all banks and the two tiles take exactly 32 KiB: two workgroups fit a CU's 64 KiB.
// a_scale arrives transposed, [ceil(K/128)][lds_a_scale] with rows padded to a multiple of 4 and zero-filled, so the
// promotion reads four rows' scales with one 16-byte load.
//
// Compiled for gfx942 and disassembled only: no AMD GPU was reachable to run it.
#include "hip_shim.h"

namespace kf {

constexpr int BM = 128, BN = 128, BK = 128;
constexpr int THREADS = 256;
constexpr int WAVE = 64;

typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef unsigned int u32x4 __attribute__((ext_vector_type(4)));

// Round-to-nearest-even fp32 -> bf16 bits; NaN stays NaN.
__device__ inline unsigned short to_bf16(float x) {
  unsigned int u = __builtin_bit_cast(unsigned int, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

// Byte offset of (row, 16-byte chunk) in a swizzled 128x128 LDS tile.
__device__ inline int swz(int row, int chunk) { return row * BK + ((chunk ^ (row & 7)) << 4); }

constexpr int VECS = (BM * BK) / (16 * THREADS);  // 16-byte vectors per thread per 128x128 tile

// One thread's share of a 128x128 byte tile, held in registers between the global load and the LDS store.
struct TileRegs {
  u32x4 v[VECS];
};

// Load a 128x128 byte tile (rows row0.., K cols k0..) with 16-byte loads; rows past `rows` read as 0.
__device__ inline void fetch_tile(TileRegs& t, const unsigned char* __restrict__ g, int ld, int row0, int rows,
                                  int k0, int tid) {
#pragma unroll
  for (int i = 0; i < VECS; ++i) {
    int idx = tid + i * THREADS;  // 0..1023: 8 chunks per row
    int r = idx >> 3, ch = idx & 7;
    t.v[i] = row0 + r < rows ? *(const u32x4*)(g + (long)(row0 + r) * ld + k0 + ch * 16) : (u32x4){0u, 0u, 0u, 0u};
  }
}

__device__ inline void store_tile(unsigned char* lds, const TileRegs& t, int tid) {
#pragma unroll
  for (int i = 0; i < VECS; ++i) {
    int idx = tid + i * THREADS;
    *(u32x4*)(lds + swz(idx >> 3, idx & 7)) = t.v[i];
  }
}

}  // namespace kf

// Two waves per SIMD (two workgroups per CU): at most 256 VGPRs (arch + AGPR) per lane.
extern "C" __global__ __launch_bounds__(256) KF_WAVES_PER_EU(2) void fp8_gemm_blockscaled_gfx942(
    const unsigned char* __restrict__ a, const unsigned char* __restrict__ b, const float* __restrict__ a_scale,
    const float* __restrict__ b_scale, unsigned short* __restrict__ c, int M, int N, int K, int lda, int ldb,
    int ld_a_scale, int bs_n, int bs_k, int ldc, float alpha) {
  using namespace kf;
  __shared__ __attribute__((aligned(16))) unsigned char lds_a[BM * BK];
  __shared__ __attribute__((aligned(16))) unsigned char lds_b[BN * BK];

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
  // Output layout: element r of lane l is row 8*(r/4) + 4*(l/32) + r%4, column l%32.
  const int orow = 4 * (lane / 32);

  // Software pipeline: the next K tile's global loads are in flight while this tile's MFMAs run.
  TileRegs ra, rb;
  fetch_tile(ra, a, lda, m0, M, 0, tid);
  fetch_tile(rb, b, ldb, n0, N, 0, tid);
  for (int k0 = 0; k0 < K; k0 += BK) {
    const int kb = k0 / BK;
    store_tile(lds_a, ra, tid);
    store_tile(lds_b, rb, tid);
    const float sb = alpha * b_scale[(long)nb * bs_n + (long)kb * bs_k];
    __syncthreads();
    if (k0 + BK < K) {
      fetch_tile(ra, a, lda, m0, M, k0 + BK, tid);
      fetch_tile(rb, b, ldb, n0, N, k0 + BK, tid);
    }

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
        fa[i] = *(const long*)(lds_a + swz(wm + i * 32 + lrow, kk / 16) + lk);
        fb[i] = *(const long*)(lds_b + swz(wn + i * 32 + lrow, kk / 16) + lk);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          part[i][j] = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(fa[i], fb[j], part[i][j], 0, 0, 0);
    }

    // FP32 promotion: acc += a_scale[m,kb] * b_scale[nb,kb] * partial, four rows per 16-byte scale load.
    const float* sa_row = a_scale + (long)kb * ld_a_scale;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = m0 + wm + i * 32 + 8 * q + orow;  // a multiple of 4, as ld_a_scale is
        const f32x4 sa = m < ld_a_scale ? *(const f32x4*)(sa_row + m) : (f32x4){};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float s = sa[t] * sb;
#pragma unroll
          for (int j = 0; j < 2; ++j) acc[i][j][4 * q + t] += s * part[i][j][4 * q + t];
        }
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
        int m = m0 + wm + i * 32 + 8 * (r / 4) + orow + (r % 4);
        int n = n0 + wn + j * 32 + lrow;
        if (m < M && n < N) c[(long)m * ldc + n] = to_bf16(acc[i][j][r]);
      }
}

// float8_e4m3fn -> float8_e4m3fnuz bit patterns, in place, for n bytes: same bits mean half the value, except
// that fn's -0 (0x80) is fnuz's NaN and fn's NaNs (0x7f, 0xff) are fnuz's +-240. Four bytes per thread.
extern "C" __global__ __launch_bounds__(256) void fp8_fn_to_fnuz(unsigned int* __restrict__ data, long n) {
  const long i = (long)KF_BID_X() * 256 + KF_TID_X();
  if (i * 4 >= n) return;
  unsigned int w = data[i], out = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    unsigned int x = (w >> (8 * k)) & 0xffu;
    unsigned int y = (x & 0x7fu) == 0x7fu ? 0x80u : (x == 0x80u ? 0u : x);
    out |= y << (8 * k);
  }
  data[i] = out;
}

#if !defined(__HIP_DEVICE_COMPILE__) && __has_include(<hip/hip_runtime.h>)
// Host launcher (compiled only in a full ROCm build): grid = (ceil(N/128), ceil(M/128)), 256 threads.
// a_scale_t: [ceil(K/128)][ld_a_scale] fp32, ld_a_scale = M rounded up to 4, padding zero-filled.
extern "C" hipError_t fp8_gemm_rocm_launch(const void* a, const void* b, const float* a_scale_t, const float* b_scale,
                                           void* c, int M, int N, int K, int lda, int ldb, int ld_a_scale, int bs_n,
                                           int bs_k, int ldc, float alpha, hipStream_t stream) {
  if (K % 128 != 0 || ld_a_scale % 4 != 0 || ld_a_scale < M) return hipErrorInvalidValue;
  dim3 grid((N + kf::BN - 1) / kf::BN, (M + kf::BM - 1) / kf::BM);
  hipLaunchKernelGGL(fp8_gemm_blockscaled_gfx942, grid, dim3(kf::THREADS), 0, stream, (const unsigned char*)a,
                     (const unsigned char*)b, a_scale_t, b_scale, (unsigned short*)c, M, N, K, lda, ldb, ld_a_scale,
                     bs_n, bs_k, ldc, alpha);
  return hipGetLastError();
}
#endif

#if !defined(__HIP_DEVICE_COMPILE__) && __has_include(<hip/hip_runtime.h>) && __has_include(<ATen/ATen.h>)
// Host side, compiled only in a full ROCm build (hipcc + a ROCm torch); never compiled or run here.
// A ROCm torch reports HIP devices as "cuda", so torch-ext's dispatch reaches gemm_cuda: the ROCm component
// defines it (the CUDA component is not part of a ROCm variant). torch-ext has already checked dims, dtypes,
// devices and scale shapes.
#include <ATen/ATen.h>
#include <c10/hip/HIPStream.h>

void gemm_cuda(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
               at::Tensor &c, bool strict) {
  TORCH_CHECK(!strict, "gemm_strict: the ROCm build has only the MFMA FP8 (fast) path; call gemm");
  const int64_t M = a.size(0), N = b.size(0), K = a.size(1);
  TORCH_CHECK(K % 128 == 0, "gemm: the ROCm kernel needs K to be a multiple of 128, got K = ", K);
  TORCH_CHECK(M < (int64_t(1) << 31) && N < (int64_t(1) << 31) && K < (int64_t(1) << 31),
              "gemm: M, N and K must each be below 2^31, got ", M, ", ", N, ", ", K);
  const hipStream_t stream = c10::hip::getCurrentHIPStream().stream();
  // K-major operands; K % 128 == 0 keeps every row 16-byte aligned.
  at::Tensor a8 = a.contiguous(), b8 = b.contiguous();
  float alpha = 1.0f;
  if (a.scalar_type() == at::kFloat8_e4m3fn) {
    // Rewrite OCP e4m3fn bits as e4m3fnuz in private copies; each operand's value halves, alpha restores it.
    for (at::Tensor *t : {&a8, &b8}) {
      *t = t->clone();
      const int64_t n = t->numel();
      hipLaunchKernelGGL(fp8_fn_to_fnuz, dim3((n / 4 + 255) / 256), dim3(256), 0, stream,
                         (unsigned int *)t->data_ptr(), (long)n);
    }
    alpha = 4.0f;
  }
  // a_scale transposed to [K/128][M rounded up to 4], zero-padded, for 16-byte scale loads.
  const int64_t ld_sa = (M + 3) / 4 * 4;
  at::Tensor sa = at::zeros({K / 128, ld_sa}, a_scale.options());
  sa.narrow(1, 0, M).copy_(a_scale.t());
  const hipError_t e = fp8_gemm_rocm_launch(a8.data_ptr(), b8.data_ptr(), sa.data_ptr<float>(),
                                            b_scale.data_ptr<float>(), c.data_ptr(), int(M), int(N), int(K),
                                            int(K), int(K), int(ld_sa), int(b_scale.stride(0)),
                                            int(b_scale.stride(1)), int(c.stride(0)), alpha, stream);
  TORCH_CHECK(e == hipSuccess, "gemm: ROCm kernel launch failed: ", hipGetErrorString(e));
}
#endif
