"""FP8 (e4m3) block-scaled GEMM: c = dequant(a) @ dequant(b).T, 1x128 scales for a, 128x128 for b."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["gemm"]


def _ceil_div(x: int, y: int) -> int:
    return (x + y - 1) // y


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out: torch.Tensor | None = None,
    precision: str = "fast",
) -> torch.Tensor:
    """Returns bf16 [M, N]; `precision` is "fast" (norm-accurate) or "strict" (per-element accurate)."""
    if precision not in ("fast", "strict"):
        raise ValueError(f'gemm: precision must be "fast" or "strict", got {precision!r}')
    if out is None:  # allocated by the op: a Python torch.empty costs a few µs more per call
        return ops.gemm_alloc(a, b, a_scale, b_scale, precision == "strict")
    op = ops.gemm if precision == "fast" else ops.gemm_strict
    op(a, b, a_scale, b_scale, out)
    return out


# Fake (meta) implementations for torch.compile; their shape checks mirror the C++ ones so tracing fails the
# same way.
def _check_operands(a, b):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "gemm: a and b must be 2-D")
    torch._check(a.shape[1] == b.shape[1], lambda: "gemm: a and b must share K")


def _fake_gemm(a, b, a_scale, b_scale, c) -> None:
    _check_operands(a, b)
    torch._check(c.shape == (a.shape[0], b.shape[0]), lambda: "gemm: c must be [M, N]")


def _fake_gemm_alloc(a, b, a_scale, b_scale, strict=False) -> torch.Tensor:
    _check_operands(a, b)
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


for _name in ("gemm", "gemm_strict"):
    torch.library.register_fake(add_op_namespace_prefix(_name))(_fake_gemm)
torch.library.register_fake(add_op_namespace_prefix("gemm_alloc"))(_fake_gemm_alloc)
