#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>

#include "../torch-ext/torch_binding.h"

void {{py}}(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu(), "{{py}}: input must be a CPU tensor, got ", input.device());
  TORCH_CHECK(out.device().is_cpu(), "{{py}}: out must be a CPU tensor, got ", out.device());
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "{{py}}: out has dtype ", out.scalar_type(),
              ", expected the dtype of input (", input.scalar_type(), ")");
  TORCH_CHECK(out.sizes() == input.sizes(), "{{py}}: out has shape ", out.sizes(),
              ", expected the shape of input ", input.sizes());
  TORCH_CHECK(out.is_contiguous(), "{{py}}: out must be contiguous");
  auto in = input.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "{{py}}_cpu", [&] {
    const scalar_t *src = in.data_ptr<scalar_t>();
    scalar_t *dst = out.data_ptr<scalar_t>();
    const int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i) {
      dst[i] = !(static_cast<float>(src[i]) <= 0.0f) ? src[i] : scalar_t(0);
    }
  });
}
