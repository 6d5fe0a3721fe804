"""The gfx942 FP8 GEMM kernel source, executed on the CPU (tests/rocm/emu: one thread per work-item, real
barriers, the MFMA emulated from AMD's documented operand/result layout) against an fp64 reference of the
block-scaled math. This checks the kernel's tiling, LDS swizzle, scale indexing, edge handling, fn->fnuz path
and bf16 rounding; it is not a run on AMD hardware."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def driver(build_emu_driver) -> Path:
    return build_emu_driver("fp8_gemm")


def run_kernel(exe: Path, a, b, a_scale, b_scale) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    is_fn = int(a.dtype == torch.float8_e4m3fn)
    blob = (
        struct.pack("<4i", m, n, k, is_fn)
        + a.view(torch.uint8).numpy().tobytes()
        + b.view(torch.uint8).numpy().tobytes()
        + a_scale.numpy().tobytes()
        + b_scale.numpy().tobytes()
    )
    proc = subprocess.run([str(exe)], input=blob, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    bits = torch.frombuffer(bytearray(proc.stdout), dtype=torch.int16).reshape(m, n)
    return bits.view(torch.bfloat16).float()


def reference(a, b, a_scale, b_scale) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    af, bf = a.double(), b.double()
    out = torch.zeros(m, n, dtype=torch.float64)
    for kb in range(k // 128):
        part = af[:, kb * 128 : (kb + 1) * 128] @ bf[:, kb * 128 : (kb + 1) * 128].T
        sb = b_scale[:, kb].double().repeat_interleave(128)[:n]
        out += a_scale[:, kb].double()[:, None] * sb[None, :] * part
    return out


def random_case(m: int, n: int, k: int, dtype, seed: int):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 2).to(dtype)
    b = (torch.randn(n, k, generator=g) * 2).to(dtype)
    a_scale = torch.rand(m, k // 128, generator=g) + 0.5
    b_scale = torch.rand((n + 127) // 128, k // 128, generator=g) + 0.5
    return a, b, a_scale, b_scale


def assert_close(got: torch.Tensor, ref: torch.Tensor) -> None:
    # bf16 output: half an ulp is 2^-9 relative; fp32 accumulation order adds far less.
    err = (got.double() - ref).abs()
    bound = ref.abs() * 2.0**-8 + 1e-6 * ref.abs().max()
    i = int((err - bound).argmax())
    assert bool((err <= bound).all()), f"element {i}: got {got.flatten()[i]}, ref {ref.flatten()[i]}"


def test_fnuz_with_partial_tiles(driver):
    # M and N not multiples of 128: the edge rows/columns of the last tiles are masked.
    a, b, sa, sb = random_case(200, 300, 384, torch.float8_e4m3fnuz, seed=1)
    got = run_kernel(driver, a, b, sa, sb)
    assert_close(got, reference(a, b, sa, sb))


def test_e4m3fn_inputs_go_through_the_fnuz_rewrite(driver):
    a, b, sa, sb = random_case(128, 256, 256, torch.float8_e4m3fn, seed=2)
    # Negative zeros are fnuz's NaN byte unless rewritten.
    a[0, :64] = -0.0
    b[3, 100:140] = -0.0
    got = run_kernel(driver, a, b, sa, sb)
    assert torch.isfinite(got).all()
    assert_close(got, reference(a, b, sa, sb))


def test_scales_are_applied_per_128_k_block(driver):
    # Constant operands, scales that differ per K block: catches a scale read for the wrong block or row.
    m, n, k = 130, 129, 512
    a = torch.full((m, k), 1.0).to(torch.float8_e4m3fnuz)
    b = torch.full((n, k), 0.5).to(torch.float8_e4m3fnuz)
    sa = torch.arange(m * 4, dtype=torch.float32).reshape(m, 4) / 64 + 1
    sb = torch.tensor([[1.0, 2.0, 4.0, 8.0], [0.5, 0.25, 0.125, 1.0]])
    got = run_kernel(driver, a, b, sa, sb)
    assert_close(got, reference(a, b, sa, sb))
