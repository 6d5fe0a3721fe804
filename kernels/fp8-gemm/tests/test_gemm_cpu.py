"""CPU backend of fp8_gemm against a float64 dequantised reference (the challenge's ref_kernel math)."""

import re

import pytest
import torch

from .fp8_ref import make_inputs, poisoned, reference, rel_err, strict_bad

SHAPES = [(64, 64, 128), (96, 576, 256), (128, 200, 384), (70, 130, 300), (1, 7, 128), (256, 320, 1024)]


@pytest.mark.parametrize("mn_major", [False, True])
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e4m3fnuz])
def test_matches_float64_reference(fp8_gemm, m, n, k, mn_major, dtype):
    a, b, a_s, b_s = make_inputs(m, n, k, dtype, mn_major, seed=m * 7 + n + k)
    ref = reference(a, b, a_s, b_s)
    for precision in ("fast", "strict"):
        out = fp8_gemm.gemm(a, b, a_s, b_s, out=poisoned(m, n), precision=precision)
        assert not out.isnan().any(), "some output element was not written"
        err = rel_err(out, ref)
        assert err < 2e-3, f"relative Frobenius error {err:.2e}"
        bad = strict_bad(out, ref)
        assert bad == 0, f"{bad} elements outside the per-element tolerance"


def test_fnuz_is_half_of_fn_for_the_same_bits(fp8_gemm):
    a, b, a_s, b_s = make_inputs(64, 128, 256)
    # 0x80 is -0 in fn but NaN in fnuz: clear those bytes so both dtypes read finite values
    a_bits, b_bits = (t.view(torch.uint8).masked_fill(t.view(torch.uint8) == 0x80, 0) for t in (a, b))
    out_fn = fp8_gemm.gemm(a_bits.view(torch.float8_e4m3fn), b_bits.view(torch.float8_e4m3fn), a_s, b_s)
    out_fnuz = fp8_gemm.gemm(a_bits.view(torch.float8_e4m3fnuz), b_bits.view(torch.float8_e4m3fnuz), a_s, b_s)
    # each operand halves, so the product is a quarter (exact: powers of two)
    assert torch.equal(out_fnuz.float() * 4, out_fn.float())


def test_fnuz_0x80_is_nan(fp8_gemm):
    a, b, a_s, b_s = make_inputs(64, 128, 128, torch.float8_e4m3fnuz)
    bits = a.view(torch.uint8).clone()
    bits[3, 5] = 0x80
    out = fp8_gemm.gemm(bits.view(torch.float8_e4m3fnuz), b, a_s, b_s)
    assert out[3].isnan().all() and not out[:3].isnan().any()


def test_sliced_inputs_with_odd_strides(fp8_gemm):
    a, b, a_s, b_s = make_inputs(128, 256, 512)
    a2, b2 = a[::2], b[1::2]
    a_s2, b_s2 = a_s[::2], b_s[:1]
    b2 = b2[:128]
    ref = reference(a2, b2, a_s2, b_s2)
    out = fp8_gemm.gemm(a2, b2, a_s2, b_s2)
    assert ((out.double() - ref).norm() / ref.norm()) < 2e-3


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda t: {**t, "a": t["a"].float()}, "a must be float8_e4m3fn or float8_e4m3fnuz"),
        (lambda t: {**t, "b": t["b"][:, :128]}, "b must be [N, K] with K = 256"),
        (lambda t: {**t, "a_scale": t["a_scale"][:, :1]}, "a_scale must be [M, ceil(K/128)] = [64, 2]"),
        (lambda t: {**t, "b_scale": t["b_scale"].double()}, "b_scale must be float32"),
        (lambda t: {**t, "c": t["c"].float()}, "c must be bfloat16"),
        (lambda t: {**t, "c": t["c"][:, :64]}, "c must be [M, N] = [64, 128]"),
        (lambda t: {**t, "b_scale": t["b_scale"].repeat(2, 1)}, "b_scale must be [ceil(N/128), ceil(K/128)]"),
    ],
)
def test_bad_arguments_are_named(fp8_gemm, mutate, message):
    a, b, a_s, b_s = make_inputs(64, 128, 256)
    args = mutate({"a": a, "b": b, "a_scale": a_s, "b_scale": b_s, "c": poisoned(64, 128)})
    with pytest.raises(RuntimeError, match=re.escape(message)):
        fp8_gemm.ops.gemm(args["a"], args["b"], args["a_scale"], args["b_scale"], args["c"])


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda t: {**t, "a": t["a"][0]}, "a must be 2-D [M, K], got 1 dims"),
        (lambda t: {**t, "b": t["b"][:, :128]}, "b must be [N, K] with K = 256"),
        (lambda t: {**t, "a_scale": t["a_scale"][:, :1]}, "a_scale must be [M, ceil(K/128)] = [64, 2]"),
    ],
)
def test_bad_arguments_are_named_when_the_op_allocates(fp8_gemm, mutate, message):
    a, b, a_s, b_s = make_inputs(64, 128, 256)
    args = mutate({"a": a, "b": b, "a_scale": a_s, "b_scale": b_s})
    with pytest.raises(RuntimeError, match=re.escape(message)):
        fp8_gemm.gemm(args["a"], args["b"], args["a_scale"], args["b_scale"])


@pytest.mark.parametrize("precision", ["fast", "strict"])
def test_allocating_call_matches_the_out_call(fp8_gemm, precision):
    a, b, a_s, b_s = make_inputs(70, 130, 300, mn_major=True)
    into = fp8_gemm.gemm(a, b, a_s, b_s, out=poisoned(70, 130), precision=precision)
    new = fp8_gemm.gemm(a, b, a_s, b_s, precision=precision)
    assert new.dtype == torch.bfloat16 and new.shape == (70, 130) and new.is_contiguous()
    assert torch.equal(new, into)
    assert strict_bad(new, reference(a, b, a_s, b_s)) == 0


def test_bad_precision_is_named(fp8_gemm):
    a, b, a_s, b_s = make_inputs(64, 128, 256)
    with pytest.raises(ValueError, match="precision must be"):
        fp8_gemm.gemm(a, b, a_s, b_s, precision="exact")


def test_torch_compile_fullgraph(fp8_gemm):
    a, b, a_s, b_s = make_inputs(64, 128, 256)

    @torch.compile(fullgraph=True, backend="eager")
    def f(a, b, a_s, b_s):
        c = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)
        fp8_gemm.ops.gemm(a, b, a_s, b_s, c)
        return c * 2

    out = f(a, b, a_s, b_s)
    ref = reference(a, b, a_s, b_s) * 2
    assert ((out.double() - ref).norm() / ref.norm()) < 2e-3


def test_torch_compile_fullgraph_through_the_wrapper(fp8_gemm):
    a, b, a_s, b_s = make_inputs(96, 200, 384, mn_major=True)

    @torch.compile(fullgraph=True, backend="eager")
    def f(a, b, a_s, b_s):
        return fp8_gemm.gemm(a, b, a_s, b_s, precision="strict").float().relu()

    out = f(a, b, a_s, b_s)
    ref = reference(a, b, a_s, b_s).relu()
    assert out.shape == (96, 200)
    assert strict_bad(out.bfloat16(), ref) == 0
