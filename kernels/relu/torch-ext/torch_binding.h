#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

// out = max(input, 0) elementwise; NaN stays NaN like torch.relu. out must be contiguous, same shape/dtype.
void relu(at::Tensor &out, at::Tensor const &input);

// The checks every backend's relu makes on out against input (each backend checks the device type itself).
inline void check_relu_out(at::Tensor const &out, at::Tensor const &input) {
  TORCH_CHECK(out.device() == input.device(), "relu: out is on ", out.device(), " but input is on ",
              input.device());
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "relu: out has dtype ", out.scalar_type(),
              " but input has dtype ", input.scalar_type());
  TORCH_CHECK(out.sizes() == input.sizes(), "relu: out has shape ", out.sizes(), " but input has shape ",
              input.sizes());
  TORCH_CHECK(out.is_contiguous(), "relu: out must be contiguous");
}
