#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>

#include "../torch-ext/torch_binding.h"

void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu(), "relu: input must be a CPU tensor, got ", input.device());
  check_relu_out(out, input);
  at::Tensor const in = input.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "relu_cpu", [&] {
    scalar_t const *src = in.const_data_ptr<scalar_t>();
    scalar_t *dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, in.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float const v = static_cast<float>(src[i]);
        // `v > 0` is false for NaN; keep NaN as torch.relu does.
        dst[i] = (v > 0.0f || std::isnan(v)) ? src[i] : scalar_t(0);
      }
    });
  });
}
