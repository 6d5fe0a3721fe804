// Runs gfx942 HIP kernels on the CPU for testing: one std::thread per work-item, a std::barrier per workgroup
// (__syncthreads) and per wave, and the FP8 MFMA emulated from AMD's documented operand/result layout. Include
// this before the kernel source (clang++ -include); `__shared__` becomes `static`, so workgroups run one at a
// time. It checks the kernel's indexing and arithmetic, not timing or the hardware itself.
#pragma once
#define KF_HOST_EMULATION 1

#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(n)
#define KF_WAVES_PER_EU(n)

namespace emu {

constexpr int WAVE = 64;
typedef float f32x16 __attribute__((ext_vector_type(16)));

inline thread_local int tid = 0;
inline int bid_x = 0, bid_y = 0, grid_x = 1;
inline std::barrier<>* block_barrier = nullptr;
inline std::vector<std::barrier<>*> wave_barriers;
inline std::vector<long> xa, xb;  // one 8-byte operand per lane, for the MFMA exchange

// float8_e4m3fnuz: bias 8, no infinities, 0x80 the only NaN.
inline float fnuz(unsigned char x) {
  if (x == 0x80) return NAN;
  const int e = (x >> 3) & 15, m = x & 7;
  const float v = e == 0 ? std::ldexp(m / 8.0f, 1 - 8) : std::ldexp(1.0f + m / 8.0f, e - 8);
  return (x & 0x80) ? -v : v;
}

inline unsigned char byte_of(long v, int i) { return (unsigned char)((unsigned long)v >> (8 * i)); }

// v_mfma_f32_32x32x16_fp8_fp8: A[i][k] is byte k%8 of lane i + 32*(k/8); B[k][j] byte k%8 of lane j + 32*(k/8);
// D[i][j] is element (i%4) + 4*(i/8) of lane j + 32*((i/4)%2).
inline f32x16 mfma_32x32x16_fp8(long a, long b, f32x16 c) {
  const int w = tid / WAVE, l = tid % WAVE;
  xa[tid] = a;
  xb[tid] = b;
  wave_barriers[w]->arrive_and_wait();
  const int base = w * WAVE, j = l % 32;
  for (int r = 0; r < 16; ++r) {
    const int i = 8 * (r / 4) + 4 * (l / 32) + r % 4;
    float s = 0.0f;
    for (int k = 0; k < 16; ++k)
      s += fnuz(byte_of(xa[base + i + 32 * (k / 8)], k % 8)) * fnuz(byte_of(xb[base + j + 32 * (k / 8)], k % 8));
    c[r] += s;
  }
  wave_barriers[w]->arrive_and_wait();  // every lane has read the operands before any lane writes new ones
  return c;
}

// Run `kernel` over a grid of workgroups of `threads` work-items (a multiple of 64), one workgroup at a time.
inline void launch(int grid_x_, int grid_y, int threads, const std::function<void()>& kernel) {
  std::barrier<> block(threads);
  std::vector<std::barrier<>*> waves;
  for (int w = 0; w < threads / WAVE; ++w) waves.push_back(new std::barrier<>(WAVE));
  block_barrier = &block;
  wave_barriers = waves;
  xa.assign(threads, 0);
  xb.assign(threads, 0);
  grid_x = grid_x_;
  for (int y = 0; y < grid_y; ++y)
    for (int x = 0; x < grid_x_; ++x) {
      bid_x = x;
      bid_y = y;
      std::vector<std::thread> items;
      for (int t = 0; t < threads; ++t)
        items.emplace_back([t, &kernel] {
          tid = t;
          kernel();
        });
      for (auto& th : items) th.join();
    }
  for (auto* b : waves) delete b;
}

}  // namespace emu

#define KF_TID_X() emu::tid
#define KF_BID_X() emu::bid_x
#define KF_BID_Y() emu::bid_y
#define __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, cbsz, abid, blgp) emu::mfma_32x32x16_fp8(a, b, c)
inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }
