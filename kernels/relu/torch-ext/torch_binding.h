#pragma once

#include <ATen/core/Tensor.h>

// out = max(input, 0) elementwise; NaN stays NaN like torch.relu. out must be contiguous, same shape/dtype.
void relu(at::Tensor &out, at::Tensor const &input);
