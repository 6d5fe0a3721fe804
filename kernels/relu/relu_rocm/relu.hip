// ReLU for AMD GPUs (HIP). out[i] = in[i] > 0 ? in[i] : +0, NaN kept, as torch.relu does.
// Works on the bit patterns, so one kernel per element width serves every floating dtype: a value becomes +0
// exactly when its sign bit is set and it is not a NaN. Each thread handles 16 bytes, then a scalar tail.
//
// Device code compiles with Debian's clang-19 (`kforge build --backend rocm --device-only`) and with hipcc;
// the host part needs a ROCm torch. Compiled and disassembled here, never run: no AMD GPU was reachable.
#if defined(KF_HOST_EMULATION)  // tests/rocm/emu runs the kernels on the CPU
#define RELU_TID() ((long)emu::bid_x * 256 + emu::tid)
#define RELU_THREADS() ((long)emu::grid_x * 256)
#define RELU_WG256
#elif __has_include(<hip/hip_runtime.h>)
#include <hip/hip_runtime.h>
#define RELU_TID() (blockIdx.x * (long)blockDim.x + threadIdx.x)
#define RELU_THREADS() ((long)gridDim.x * blockDim.x)
#define RELU_WG256 __attribute__((amdgpu_flat_work_group_size(1, 256)))
#else
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define RELU_TID() ((long)__builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x())
#define RELU_THREADS() ((long)__builtin_amdgcn_grid_size_x())
#define RELU_WG256 __attribute__((amdgpu_flat_work_group_size(1, 256)))
#endif

namespace relu_rocm {

typedef unsigned int u32x4 __attribute__((ext_vector_type(4)));

// T: the unsigned integer of the element's width; SIGN and INF: its sign bit and +infinity bits.
template <typename T, T SIGN, T INF>
__device__ inline T relu_bits(T x) {
  const bool nan = (x & T(~SIGN)) > INF;
  return ((x & SIGN) && !nan) ? T(0) : x;
}

template <typename T, T SIGN, T INF>
__device__ inline void relu_n(T* __restrict__ out, const T* __restrict__ in, long n) {
  constexpr long PER_VEC = 16 / sizeof(T);
  const long vecs = n / PER_VEC;
  // Vector path: both pointers come from fresh torch allocations (16-byte aligned) in the host code.
  for (long v = RELU_TID(); v < vecs; v += RELU_THREADS()) {
    u32x4 w = ((const u32x4*)in)[v];
    T* e = (T*)&w;
#pragma unroll
    for (int k = 0; k < PER_VEC; ++k) e[k] = relu_bits<T, SIGN, INF>(e[k]);
    ((u32x4*)out)[v] = w;
  }
  for (long i = vecs * PER_VEC + RELU_TID(); i < n; i += RELU_THREADS()) out[i] = relu_bits<T, SIGN, INF>(in[i]);
}

}  // namespace relu_rocm

extern "C" __global__ RELU_WG256 void relu_f32(
    unsigned int* __restrict__ out, const unsigned int* __restrict__ in, long n) {
  relu_rocm::relu_n<unsigned int, 0x80000000u, 0x7f800000u>(out, in, n);
}

extern "C" __global__ RELU_WG256 void relu_f64(
    unsigned long* __restrict__ out, const unsigned long* __restrict__ in, long n) {
  relu_rocm::relu_n<unsigned long, 0x8000000000000000ul, 0x7ff0000000000000ul>(out, in, n);
}

extern "C" __global__ RELU_WG256 void relu_f16(
    unsigned short* __restrict__ out, const unsigned short* __restrict__ in, long n) {
  relu_rocm::relu_n<unsigned short, 0x8000, 0x7c00>(out, in, n);
}

extern "C" __global__ RELU_WG256 void relu_bf16(
    unsigned short* __restrict__ out, const unsigned short* __restrict__ in, long n) {
  relu_rocm::relu_n<unsigned short, 0x8000, 0x7f80>(out, in, n);
}

#if !defined(__HIP_DEVICE_COMPILE__) && __has_include(<hip/hip_runtime.h>) && __has_include(<ATen/ATen.h>)
// Host side, compiled only in a full ROCm build (hipcc + a ROCm torch): torch-ext registers `relu` for the
// "cuda" dispatch key, which is what a ROCm torch calls its HIP devices.
#include <ATen/ATen.h>
#include <c10/hip/HIPStream.h>

#include "../torch-ext/torch_binding.h"

void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.device().is_cuda(), "relu: input must be a ROCm (cuda) tensor, got ", input.device());
  check_relu_out(out, input);
  at::Tensor const in = input.contiguous();
  const long n = in.numel();
  if (n == 0) return;
  const bool aligned = reinterpret_cast<uintptr_t>(in.data_ptr()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  TORCH_CHECK(aligned, "relu: the ROCm kernel needs 16-byte aligned storage (a tensor view with an offset?)");
  const hipStream_t stream = c10::hip::getCurrentHIPStream().stream();
  const long vecs = n * in.element_size() / 16 + 1;
  const dim3 grid(static_cast<unsigned>(std::min<long>((vecs + 255) / 256, 1 << 16))), block(256);
  switch (in.scalar_type()) {
    case at::kFloat:
      hipLaunchKernelGGL(relu_f32, grid, block, 0, stream, (unsigned int *)out.data_ptr(),
                         (const unsigned int *)in.data_ptr(), n);
      break;
    case at::kDouble:
      hipLaunchKernelGGL(relu_f64, grid, block, 0, stream, (unsigned long *)out.data_ptr(),
                         (const unsigned long *)in.data_ptr(), n);
      break;
    case at::kHalf:
      hipLaunchKernelGGL(relu_f16, grid, block, 0, stream, (unsigned short *)out.data_ptr(),
                         (const unsigned short *)in.data_ptr(), n);
      break;
    case at::kBFloat16:
      hipLaunchKernelGGL(relu_bf16, grid, block, 0, stream, (unsigned short *)out.data_ptr(),
                         (const unsigned short *)in.data_ptr(), n);
      break;
    default:
      TORCH_CHECK(false, "relu: dtype ", in.scalar_type(), " is not supported; expected float32, float64, "
                  "float16 or bfloat16");
  }
  const hipError_t e = hipGetLastError();
  TORCH_CHECK(e == hipSuccess, "relu: ROCm kernel launch failed: ", hipGetErrorString(e));
}
#endif
