#pragma once
#include <torch/library.h>

// c = dequant(a) @ dequant(b).T with 1x128 (a) and 128x128 (b) fp32 block scales; strict selects the
// per-element-accurate path where a backend has a faster, less exact one.
void gemm(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
          at::Tensor &c);
void gemm_strict(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale,
                 const at::Tensor &b_scale, at::Tensor &c);
// The same into a new bf16 [M, N] tensor (allocated here: cheaper per call than a torch.empty in Python).
at::Tensor gemm_alloc(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale,
                      const at::Tensor &b_scale, bool strict);
void gemm_cpu(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
              at::Tensor &c);
// strict: bf16 tensor cores on sm_90a (exact products); the generic kernel is exact in both modes.
void gemm_cuda(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
               at::Tensor &c, bool strict);
