#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../torch-ext/torch_binding.h"

namespace {

template <typename T>
__global__ void relu_kernel(T *__restrict__ out, T const *__restrict__ in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float const v = static_cast<float>(in[i]);
    // `v > 0` is false for NaN; keep NaN as torch.relu does.
    out[i] = (v > 0.0f || isnan(v)) ? in[i] : T(0.0f);
  }
}

}  // namespace

void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.device().is_cuda(), "relu: input must be a CUDA tensor, got ", input.device());
  check_relu_out(out, input);
  at::Tensor const in = input.contiguous();
  int64_t const n = in.numel();
  if (n == 0) {
    return;
  }
  c10::cuda::CUDAGuard const guard(in.device());
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
  int const threads = 256;
  int64_t const blocks = std::min<int64_t>((n + threads - 1) / threads, int64_t(1) << 16);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "relu_cuda", [&] {
    relu_kernel<scalar_t><<<blocks, threads, 0, stream>>>(out.data_ptr<scalar_t>(),
                                                          in.const_data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
