"""The e4m3fn -> e4m3fnuz byte mapping the gfx942 GEMM applies (fp8_fn_to_fnuz), checked on all 256 bytes
against torch's own float8 dtypes: the mapped byte, read as fnuz, is exactly half the fn value, and NaN stays
NaN. With both operands halved, alpha = 4 restores every product."""

import torch


def fn_to_fnuz(x: int) -> int:
    # Same rule as kernels/fp8-gemm/gemm_rocm/fp8_gemm_gfx942.hip: fn NaNs -> fnuz NaN (0x80), fn -0 -> +0.
    if x & 0x7F == 0x7F:
        return 0x80
    return 0 if x == 0x80 else x


def test_every_byte_maps_to_half_its_value():
    raw = torch.arange(256, dtype=torch.uint8)
    fn = raw.view(torch.float8_e4m3fn).float()
    mapped = torch.tensor([fn_to_fnuz(int(x)) for x in raw], dtype=torch.uint8)
    fnuz = mapped.view(torch.float8_e4m3fnuz).float()
    nan = torch.isnan(fn)
    assert nan.sum() == 2  # 0x7f and 0xff
    assert torch.isnan(fnuz[nan]).all()
    assert torch.equal(fnuz[~nan] * 2, fn[~nan])
    # Only the fn NaNs map onto fnuz's single NaN byte.
    assert torch.isnan(fnuz).sum() == 2
    # Products of two halved operands scaled by 4 are exact.
    a, b = fn[~nan], fnuz[~nan]
    assert torch.equal((b[:, None] * b[None, :]) * 4, a[:, None] * a[None, :])
