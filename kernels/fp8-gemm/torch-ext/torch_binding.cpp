#include "torch_binding.h"

#include <ATen/ATen.h>

#include "registration.h"

namespace {
int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

void check_device(const at::Tensor &a, const at::Tensor &t) {
  TORCH_CHECK(t.device() == a.device(), "gemm: all tensors must be on ", a.device(), ", got one on ", t.device());
}

// Every argument is checked here, once, so each backend can assume a valid problem: the operands first (they
// give the output's shape), then the output.
void check_operands(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale) {
  TORCH_CHECK(a.dim() == 2, "gemm: a must be 2-D [M, K], got ", a.dim(), " dims");
  TORCH_CHECK(b.dim() == 2, "gemm: b must be 2-D [N, K], got ", b.dim(), " dims");
  auto is_fp8 = [](at::ScalarType t) {
    return t == at::kFloat8_e4m3fn || t == at::kFloat8_e4m3fnuz;
  };
  TORCH_CHECK(is_fp8(a.scalar_type()), "gemm: a must be float8_e4m3fn or float8_e4m3fnuz, got ",
              a.scalar_type());
  TORCH_CHECK(b.scalar_type() == a.scalar_type(), "gemm: b must have the same dtype as a (", a.scalar_type(),
              "), got ", b.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
  TORCH_CHECK(b.size(1) == K, "gemm: b must be [N, K] with K = ", K, " (from a), got K = ", b.size(1));
  const int64_t kb = ceil_div(K, 128);
  TORCH_CHECK(a_scale.scalar_type() == at::kFloat, "gemm: a_scale must be float32, got ", a_scale.scalar_type());
  TORCH_CHECK(b_scale.scalar_type() == at::kFloat, "gemm: b_scale must be float32, got ", b_scale.scalar_type());
  TORCH_CHECK(a_scale.dim() == 2 && a_scale.size(0) == M && a_scale.size(1) == kb,
              "gemm: a_scale must be [M, ceil(K/128)] = [", M, ", ", kb, "], got ", a_scale.sizes());
  TORCH_CHECK(b_scale.dim() == 2 && b_scale.size(0) == ceil_div(N, 128) && b_scale.size(1) == kb,
              "gemm: b_scale must be [ceil(N/128), ceil(K/128)] = [", ceil_div(N, 128), ", ", kb, "], got ",
              b_scale.sizes());
  for (const auto *t : {&b, &a_scale, &b_scale}) check_device(a, *t);
}

void check_output(const at::Tensor &a, const at::Tensor &b, const at::Tensor &c) {
  const int64_t M = a.size(0), N = b.size(0);
  TORCH_CHECK(c.scalar_type() == at::kBFloat16, "gemm: c must be bfloat16, got ", c.scalar_type());
  TORCH_CHECK(c.dim() == 2 && c.size(0) == M && c.size(1) == N, "gemm: c must be [M, N] = [", M, ", ", N,
              "], got ", c.sizes());
  TORCH_CHECK(c.is_contiguous(), "gemm: c must be row-major contiguous, got strides ", c.strides());
  check_device(a, c);
}

// Runs the backend for a's device on checked arguments.
void dispatch(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
              at::Tensor &c, bool strict) {
  (void)strict;  // only the CUDA backend has two paths
#if defined(CUDA_KERNEL)
  if (a.device().is_cuda()) return gemm_cuda(a, b, a_scale, b_scale, c, strict);
#endif
#if defined(CPU_KERNEL)
  // The CPU reference sums exact fp32 products per 128-K block, which meets both precision modes.
  if (a.device().is_cpu()) return gemm_cpu(a, b, a_scale, b_scale, c);
#endif
  TORCH_CHECK(false, "gemm: this build has no backend for tensors on ", a.device());
}

// The out= ops: every argument checked, then the backend.
void gemm_into(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
               at::Tensor &c, bool strict) {
  check_operands(a, b, a_scale, b_scale);
  check_output(a, b, c);
  dispatch(a, b, a_scale, b_scale, c, strict);
}
}  // namespace

void gemm(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale, const at::Tensor &b_scale,
          at::Tensor &c) {
  gemm_into(a, b, a_scale, b_scale, c, false);
}

void gemm_strict(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale,
                 const at::Tensor &b_scale, at::Tensor &c) {
  gemm_into(a, b, a_scale, b_scale, c, true);
}

at::Tensor gemm_alloc(const at::Tensor &a, const at::Tensor &b, const at::Tensor &a_scale,
                      const at::Tensor &b_scale, bool strict) {
  check_operands(a, b, a_scale, b_scale);
  at::Tensor c = at::empty({a.size(0), b.size(0)}, a.options().dtype(at::kBFloat16));
  dispatch(a, b, a_scale, b_scale, c, strict);
  return c;
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("gemm(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor! c) -> ()");
  ops.def("gemm_strict(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor! c) -> ()");
  ops.def("gemm_alloc(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, bool strict=False) -> Tensor");
#if defined(CPU_KERNEL)
  ops.impl("gemm", c10::kCPU, &gemm);
  ops.impl("gemm_strict", c10::kCPU, &gemm_strict);
  ops.impl("gemm_alloc", c10::kCPU, &gemm_alloc);
#endif
#if defined(CUDA_KERNEL)
  ops.impl("gemm", c10::kCUDA, &gemm);
  ops.impl("gemm_strict", c10::kCUDA, &gemm_strict);
  ops.impl("gemm_alloc", c10::kCUDA, &gemm_alloc);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
