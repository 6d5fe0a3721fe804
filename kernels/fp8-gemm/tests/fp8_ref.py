"""Inputs and the float64 reference shared by the CPU and GPU tests (the challenge's ref_kernel math)."""

import torch


def ceil_div(x: int, y: int) -> int:
    return (x + y - 1) // y


def make_inputs(m, n, k, dtype=torch.float8_e4m3fn, mn_major=False, seed=0, device="cpu"):
    """randn-cast fp8 operands and randn scales of both signs, as the challenge generates them."""
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device)

    if mn_major:  # the challenge layout: created as (K, M) / (K, N) then transposed
        a = randn(k, m).to(dtype).T
        b = randn(k, n).to(dtype).T
        a_s = randn(ceil_div(k, 128), m).T
        b_s = randn(ceil_div(k, 128), ceil_div(n, 128)).T
    else:
        a = randn(m, k).to(dtype)
        b = randn(n, k).to(dtype)
        a_s = randn(m, ceil_div(k, 128))
        b_s = randn(ceil_div(n, 128), ceil_div(k, 128))
    return a, b, a_s, b_s


def reference(a, b, a_s, b_s):
    m, k = a.shape
    n = b.shape[0]
    a_s_full = a_s.double().repeat_interleave(128, dim=1)[:, :k]
    b_s_full = b_s.double().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    return (a.double() * a_s_full) @ (b.double() * b_s_full).T


def poisoned(m, n, device="cpu"):
    return torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)


def rel_err(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def strict_bad(out, ref) -> int:
    """Elements failing the challenge's per-element check |out - ref| <= 1e-3 + 2e-2 |ref| (NaN fails)."""
    ok = (out.double() - ref).abs() <= 1e-3 + 2e-2 * ref.abs()
    return int((~ok).sum())
