"""The ROCm relu kernels (kernels/relu/relu_rocm/relu.hip), executed on the CPU through tests/rocm/emu, match
torch.relu bit for bit on every dtype (NaN payloads aside), including NaN, -0, infinities and subnormals.
Not a run on AMD hardware."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
import torch

DTYPES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
BITS = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


@pytest.fixture(scope="module")
def driver(build_emu_driver) -> Path:
    return build_emu_driver("relu")


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 3000, 1 << 13])
def test_matches_torch_relu_bitwise(driver, dtype, n):
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(n, generator=g, dtype=torch.float64) * 4).to(dtype)
    nan, inf = float("nan"), float("inf")
    special = torch.tensor([nan, -nan, -0.0, 0.0, inf, -inf, -1e-40, 1e-40], dtype=dtype)
    x[: min(n, len(special))] = special[: min(n, len(special))]
    blob = struct.pack("<iq", DTYPES[dtype], n) + x.view(BITS[dtype]).numpy().tobytes()
    proc = subprocess.run([str(driver)], input=blob, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    got = torch.frombuffer(bytearray(proc.stdout) or bytearray(8), dtype=BITS[dtype])[:n]
    want = torch.relu(x)
    nan = torch.isnan(want)
    assert torch.isnan(got.view(dtype)[nan]).all()
    # -0 becomes +0 (as the CUDA kernel does); every other value keeps its exact bits.
    zero = want == 0
    keep = ~nan & ~zero
    assert torch.equal(got[keep], want.view(BITS[dtype])[keep])
    assert torch.equal(got[zero], torch.zeros_like(got[zero]))
