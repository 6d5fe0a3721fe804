// Minimal HIP device vocabulary for device-only builds without HIP headers (clang -nogpuinc).
// KF_HOST_EMULATION: tests/rocm/emu provides the vocabulary to run the kernels on the CPU.
#pragma once
#if !defined(KF_HOST_EMULATION)
// At least n waves per SIMD: caps the registers the compiler may use.
#define KF_WAVES_PER_EU(n) __attribute__((amdgpu_waves_per_eu(n)))
#endif
#if defined(KF_HOST_EMULATION)
#elif __has_include(<hip/hip_runtime.h>)
#include <hip/hip_runtime.h>
#define KF_TID_X() threadIdx.x
#define KF_BID_X() blockIdx.x
#define KF_BID_Y() blockIdx.y
#else
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define KF_TID_X() __builtin_amdgcn_workitem_id_x()
#define KF_BID_X() __builtin_amdgcn_workgroup_id_x()
#define KF_BID_Y() __builtin_amdgcn_workgroup_id_y()
// A workgroup barrier that also orders LDS traffic, as __syncthreads does.
static __device__ inline void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#endif
