#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "../torch-ext/torch_binding.h"

template <typename scalar_t>
__global__ void {{py}}_kernel(scalar_t *__restrict__ out, const scalar_t *__restrict__ in, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const scalar_t x = in[i];
    out[i] = !(static_cast<float>(x) <= 0.0f) ? x : scalar_t(0);
  }
}

void {{py}}(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.is_cuda(), "{{py}}: input must be a CUDA tensor, got ", input.device());
  TORCH_CHECK(out.device() == input.device(), "{{py}}: out is on ", out.device(),
              ", expected the device of input (", input.device(), ")");
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "{{py}}: out has dtype ", out.scalar_type(),
              ", expected the dtype of input (", input.scalar_type(), ")");
  TORCH_CHECK(out.sizes() == input.sizes(), "{{py}}: out has shape ", out.sizes(),
              ", expected the shape of input ", input.sizes());
  TORCH_CHECK(out.is_contiguous(), "{{py}}: out must be contiguous");
  const c10::cuda::CUDAGuard guard(input.device());
  auto in = input.contiguous();
  const int64_t n = in.numel();
  if (n == 0) {
    return;
  }
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "{{py}}_cuda", [&] {
    {{py}}_kernel<scalar_t><<<blocks, threads, 0, stream>>>(out.data_ptr<scalar_t>(),
                                                           in.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
