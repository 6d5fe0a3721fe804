#pragma once

#include <ATen/core/Tensor.h>

// out = max(input, 0) elementwise (NaN stays NaN, like torch.relu); out is contiguous, same shape/dtype.
void {{py}}(at::Tensor &out, at::Tensor const &input);
