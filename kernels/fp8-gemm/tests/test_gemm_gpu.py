"""CUDA backend on the H200 (run there with FP8GEMM_SO set; not in CI): every compiled sm_90a configuration,
both layouts, both precision modes, fnuz, split-K, the generic fallback, against the float64 reference."""

import pytest
import torch

from .fp8_ref import make_inputs, poisoned, reference, rel_err, strict_bad

pytestmark = pytest.mark.gpu

# (M, N, K): tails in every dimension, N = 576 (a half b_scale block), K not a multiple of 128, tiny M.
SHAPES = [(64, 64, 128), (96, 576, 256), (70, 130, 384), (128, 7168, 2304), (256, 320, 1040), (1, 200, 512),
          (1024, 576, 7168), (512, 4096, 512)]  # fmt: skip
# "nc,bn,splits[,cluster[,waves]]": cluster m2 (or 2) multicasts B into two CTAs on adjacent M blocks, n2
# multicasts A into two on adjacent N blocks (odd block counts leave one CTA idle); waves 2 = 256-row tiles;
# bn 96 and 144 cross into the next b_scale block at a column known only at run time (96 dispatches to its
# three compiled columns and stores through 32-column TMA boxes; 144 compares per column and stores from
# registers); splits t leaves full waves unsplit and splits the tiles of the partial last wave; nc 3 = three
# consumer warpgroups, nc 1 = one that double-buffers its accumulator (bn 64, 96 or 128).
FAST_CONFIGS = ["2,192,1", "2,128,1", "2,64,1", "1,128,1", "2,128,3", "1,128,2", "2,192,4",
                "2,192,1,2", "2,128,1,2", "2,64,1,2", "1,128,1,2", "2,128,3,2", "1,128,2,2",
                "2,128,1,1,2", "2,128,3,1,2", "2,128,1,n2,2", "2,128,2,n2,2",
                "2,128,1,m2,2", "2,192,1,n2", "1,128,1,n2", "2,96,1", "2,144,1", "2,144,3", "2,96,1,m2",
                "2,144,1,n2", "2,128,t,1,2", "2,192,t", "2,128,t,n2,2", "2,192,t,m2",
                "3,128,1", "3,128,3", "3,128,1,n2", "3,128,2,m2",
                "1,64,1", "1,64,3", "1,64,1,m2", "1,96,1", "1,96,2", "1,96,t", "1,96,1,n2"]  # fmt: skip
STRICT_CONFIGS = ["2,128,1", "2,64,1", "1,128,1", "2,128,2", "1,128,3"]
# Tiles only strict mode's A-from-registers path compiles: three consumers, their result kept in units of
# the block scale (no second accumulator), and 128x96 (its b_scale split at a run-time column).
REG_A_CONFIGS = ["3,128,1", "3,128,2", "2,96,1", "2,96,2"]
# Strict mode's kernels: e4m3fn A widened to f16 in registers and B to f16 in global memory (the default where
# K % 16 == 0; an MN-major a copied K-major by the pass, FP8GEMM_MN=pass, or read as it lies, pass-b), the
# same with the roles swapped (C^T = B A^T: b in registers, a widened; the cost model's choice where B is much
# the larger), both widened to bf16 in global memory, or both to f16 in shared memory by converter warps.
STRICT_PATHS = {
    "f16-reg-a": {"FP8GEMM_STRICT_F16": "0", "FP8GEMM_STRICT_SWAP": "0", "FP8GEMM_MN": "pass"},
    "f16-reg-a-as-it-lies": {"FP8GEMM_STRICT_F16": "0", "FP8GEMM_MN": "pass-b"},
    "f16-reg-a-swapped": {"FP8GEMM_STRICT_F16": "0", "FP8GEMM_STRICT_SWAP": "1"},
    "bf16-global": {"FP8GEMM_STRICT_BF16": "1"},
    "f16-smem": {"FP8GEMM_STRICT_F16": "1"},
}


@pytest.fixture
def env(monkeypatch):
    return monkeypatch


def check(mod, m, n, k, mn_major, precision, dtype=torch.float8_e4m3fn, seed=0, k_major_b=False):
    a, b, a_s, b_s = make_inputs(m, n, k, dtype, mn_major, seed=seed, device="cuda")
    if k_major_b:  # a as made, b K-major
        b = b.contiguous()
    ref = reference(a, b, a_s, b_s)
    out = mod.gemm(a, b, a_s, b_s, out=poisoned(m, n, "cuda"), precision=precision)
    torch.cuda.synchronize()
    assert not out.isnan().any(), "some output element was not written"
    err, bad = rel_err(out, ref), strict_bad(out, ref)
    assert err < 2e-3, f"{m}x{n}x{k} {precision}: relative Frobenius error {err:.2e}"
    if precision == "strict":
        assert bad == 0, f"{m}x{n}x{k} strict: {bad} elements outside 1e-3 + 2e-2|ref|"
    return err, bad


@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("precision", ["fast", "strict"])
def test_default_configuration(fp8_gemm_cuda, m, n, k, mn_major, precision):
    check(fp8_gemm_cuda, m, n, k, mn_major, precision, seed=m + n + k)


@pytest.mark.parametrize("config", FAST_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(96, 576, 256), (300, 1000, 2304), (1024, 576, 7168)])
def test_every_fast_configuration(fp8_gemm_cuda, env, config, m, n, k):
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, m, n, k, False, "fast", seed=k)


@pytest.mark.parametrize("config", FAST_CONFIGS)
def test_many_units_per_cta(fp8_gemm_cuda, env, config):
    # 20+ work units per persistent CTA: the ring and the barriers carry across tiles
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, 4096, 7168, 256, False, "fast", seed=7)
    check(fp8_gemm_cuda, 4096, 4096, 2048, True, "fast", seed=8)


@pytest.mark.parametrize("config", STRICT_CONFIGS)
def test_many_units_per_cta_strict(fp8_gemm_cuda, env, config):
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, 2048, 4096, 1024, True, "strict", seed=9)


@pytest.mark.parametrize("path", STRICT_PATHS)
@pytest.mark.parametrize("config", STRICT_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(96, 576, 256), (300, 1000, 2304)])
@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
def test_every_strict_configuration(fp8_gemm_cuda, env, config, m, n, k, path, mn_major):
    for name, value in STRICT_PATHS[path].items():
        env.setenv(name, value)
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, m, n, k, mn_major, "strict", seed=n)


@pytest.mark.parametrize("mn", ["pass", "pass-b"])
@pytest.mark.parametrize("config", REG_A_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(96, 576, 256), (300, 1000, 2304), (1024, 576, 7168)])
@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
def test_reg_a_only_configurations(fp8_gemm_cuda, env, config, m, n, k, mn_major, mn):
    env.setenv("FP8GEMM_CONFIG", config)
    env.setenv("FP8GEMM_MN", mn)
    check(fp8_gemm_cuda, m, n, k, mn_major, "strict", seed=m + k)


# Strict mode on an MN-major a read into registers as it lies and widened there (FP8GEMM_MN=pass-b,
# Elem::kF16AR), b widened by its pass (transposed, or row by row where b is K-major): every tile (the
# three-consumer one reads A as 64-byte pieces), split-K and the tail split, tails in M, N and K.
@pytest.mark.parametrize("b_layout", ["b-mn-major", "b-k-major"])
@pytest.mark.parametrize("config", [*STRICT_CONFIGS, *REG_A_CONFIGS, "2,128,t"])
@pytest.mark.parametrize("m,n,k", [(64, 64, 128), (96, 576, 256), (272, 1008, 2320), (1024, 576, 7168)])
def test_strict_mn_major_a_in_registers(fp8_gemm_cuda, env, capfd, config, m, n, k, b_layout):
    env.setenv("FP8GEMM_MN", "pass-b")
    env.setenv("FP8GEMM_CONFIG", config)
    env.setenv("FP8GEMM_VERBOSE", "1")
    check(fp8_gemm_cuda, m, n, k, True, "strict", seed=m + k, k_major_b=b_layout == "b-k-major")
    assert "elem=8 " in capfd.readouterr().err


@pytest.mark.parametrize(
    "m,n,k,elem,forced",
    [(6144, 576, 7168, 8, {}), (1024, 1536, 7168, 8, {}), (6144, 576, 7168, 4, {"FP8GEMM_MN": "pass"}),
     (1024, 1536, 7168, 5, {"FP8GEMM_STRICT_SWAP": "1"}), (6144, 576, 7176, 2, {})],
    ids=["a-as-it-lies", "a-as-it-lies-1024", "a-copied", "swapped", "k-not-multiple-of-16"],
)  # fmt: skip
def test_strict_mn_major_route(fp8_gemm_cuda, env, capfd, m, n, k, elem, forced):
    # Strict mode on the challenge layout reads a as it lies (elem 8) unless told otherwise: FP8GEMM_MN=pass
    # copies it K-major (elem 4), FP8GEMM_STRICT_SWAP=1 swaps the roles (elem 5); K % 16 != 0 widens both to
    # bf16 (elem 2). Each correct.
    env.setenv("FP8GEMM_VERBOSE", "1")
    for name, value in forced.items():
        env.setenv(name, value)
    check(fp8_gemm_cuda, m, n, k, True, "strict", seed=m + n)
    assert f"elem={elem} " in capfd.readouterr().err


def test_strict_path_defaults(fp8_gemm_cuda, env, capfd):
    # A stays in registers (elem 4), or b where B is much the larger (elem 5, swapped); FP8GEMM_STRICT_SWAP
    # forces either way, FP8GEMM_STRICT_F16=1 widens both in shared memory (elem 3); both name a bad value.
    env.setenv("FP8GEMM_VERBOSE", "1")
    cases = [(256, 256, 4, {}), (256, 4096, 5, {}), (4096, 256, 4, {}), (64, 8192, 5, {}),
             (256, 4096, 4, {"FP8GEMM_STRICT_SWAP": "0"}), (4096, 256, 5, {"FP8GEMM_STRICT_SWAP": "1"}),
             (64, 1024, 3, {"FP8GEMM_STRICT_F16": "1"})]  # fmt: skip
    for m, n, elem, forced in cases:
        for name, value in forced.items():
            env.setenv(name, value)
        check(fp8_gemm_cuda, m, n, 1024, False, "strict", seed=m + n)
        assert f"elem={elem} " in capfd.readouterr().err, (m, n, forced)
    for name in ["FP8GEMM_STRICT_F16", "FP8GEMM_STRICT_SWAP"]:
        env.setenv(name, "yes")
        with pytest.raises(RuntimeError, match=f'{name} must be "0" or "1", got "yes"'):
            check(fp8_gemm_cuda, 256, 256, 512, False, "strict")
        env.delenv(name)


@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_swapped_roles_on_every_shape(fp8_gemm_cuda, env, m, n, k, mn_major):
    # Tails in every dimension with the roles swapped: the transposed stores and the per-column scales.
    env.setenv("FP8GEMM_STRICT_SWAP", "1")
    check(fp8_gemm_cuda, m, n, k, mn_major, "strict", seed=m * n + k)


def test_forced_swap_names_a_tile_it_lacks(fp8_gemm_cuda, env):
    env.setenv("FP8GEMM_STRICT_SWAP", "1")
    env.setenv("FP8GEMM_CONFIG", "3,128,1")
    with pytest.raises(RuntimeError, match="FP8GEMM_STRICT_SWAP=1 has no kernel for nc=3, bn=128"):
        check(fp8_gemm_cuda, 256, 1024, 512, False, "strict")
    env.delenv("FP8GEMM_STRICT_SWAP")
    # The cost model's swap gives way to the forced tile.
    check(fp8_gemm_cuda, 256, 4096, 1024, False, "strict")


@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_three_consumer_tile_at_its_block_bound(fp8_gemm_cuda, env, capfd, seed, mn_major):
    # The units tile sums up to kUnitsMaxBlocks = 56 blocks (K = 7168) in the tensor cores' FP32: strict must
    # hold there, and a longer K is split (a forced configuration too); MN-major: a read as it lies (elem 8).
    env.setenv("FP8GEMM_CONFIG", "3,128,1")
    env.setenv("FP8GEMM_VERBOSE", "1")
    env.setenv("FP8GEMM_MN", "pass-b")
    elem = 8 if mn_major else 4
    check(fp8_gemm_cuda, 768, 2048, 7168, mn_major, "strict", seed=seed)
    assert f"elem={elem} nc=3 waves=1 bn=128 splits=1 " in capfd.readouterr().err
    check(fp8_gemm_cuda, 384, 1024, 16384, mn_major, "strict", seed=seed)
    assert f"elem={elem} nc=3 waves=1 bn=128 splits=3 " in capfd.readouterr().err


@pytest.mark.parametrize("swap", ["0", "1", "mn-major"])
@pytest.mark.parametrize("config", ["2,128,1", "2,64,1", "1,128,1", *REG_A_CONFIGS])
def test_strict_zero_tiny_huge_and_nan_scales(fp8_gemm_cuda, env, config, swap):
    # The A-from-registers kernels keep their result in units of the current block's scale: zero scales
    # (whole rows, single blocks, a b_scale block), scales far from 1 either way and a NaN must come out as
    # the reference has them; a row whose scales are all 0 exactly 0. "mn-major": a read as it lies (its
    # rows interleave differently in the fragments, so its zeroed rows are masked byte by byte).
    if swap == "1" and config in REG_A_CONFIGS:
        pytest.skip("the swapped kernels do not compile this tile")
    env.setenv("FP8GEMM_CONFIG", config)
    mn_major = swap == "mn-major"
    if mn_major:
        env.setenv("FP8GEMM_MN", "pass-b")
    else:
        env.setenv("FP8GEMM_STRICT_SWAP", swap)
    a, b, a_s, b_s = make_inputs(384, 640, 2048, mn_major=mn_major, seed=4, device="cuda")
    a_s[7] = 0
    a_s[9, 3] = 0
    b_s[2, 5] = 0
    a_s[11] *= 1e-30
    a_s[13, 4] = 1e-25
    a_s[15] *= 1e15
    b_s[1, 1:] *= 1e-12
    a_s[20, 2] = float("nan")
    ref = reference(a, b, a_s, b_s)
    out = fp8_gemm_cuda.gemm(a, b, a_s, b_s, out=poisoned(384, 640, "cuda"), precision="strict")
    assert out[20].isnan().all()
    keep = torch.ones(384, dtype=torch.bool, device="cuda")
    keep[20] = False
    assert strict_bad(out[keep], ref[keep]) == 0
    assert (out[7] == 0).all()


@pytest.mark.parametrize("path", ["f16-reg-a", "f16-reg-a-swapped", "f16-smem"])
@pytest.mark.parametrize("config", STRICT_CONFIGS)
def test_many_units_per_cta_strict_f16(fp8_gemm_cuda, env, config, path):
    for name, value in STRICT_PATHS[path].items():
        env.setenv(name, value)
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, 2048, 4096, 1024, True, "strict", seed=10)
    check(fp8_gemm_cuda, 1024, 576, 7168, False, "strict", seed=12)


@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
def test_strict_k_not_multiple_of_16(fp8_gemm_cuda, mn_major):
    # A widened in registers needs B's K permuted in groups of 16: other K take the bf16 path
    check(fp8_gemm_cuda, 200, 384, 1000, mn_major, "strict", seed=13)


# MN-major operands transposed in shared memory (FP8GEMM_MN=smem; the cost model's other routes: the transpose
# pass, pass-b): every tile it compiles - two consumers with A read into registers and B transposed by the
# converter warps, one consumer with both transposed -, split-K and the tail split, tails in M, N (multiples
# of 16: TMA row pitches) and K.
MN_CONFIGS = ["2,128,1", "2,64,1", "1,128,1", "2,128,3", "1,128,2", "2,64,t"]


@pytest.mark.parametrize("config", MN_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(64, 64, 128), (96, 576, 256), (272, 1008, 2320), (1024, 576, 7168)])
def test_mn_major_in_shared_memory(fp8_gemm_cuda, env, config, m, n, k):
    env.setenv("FP8GEMM_MN", "smem")
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, m, n, k, True, "fast", seed=m + k)


@pytest.mark.parametrize("config", MN_CONFIGS)
def test_mn_major_in_shared_memory_matches_the_pass(fp8_gemm_cuda, env, config):
    # Same tile either way; the shared-memory transpose permutes K within each 16-byte chunk (of both
    # operands), so the tensor cores may round differently: close, not bit-equal. Many units per CTA.
    env.setenv("FP8GEMM_CONFIG", config)
    a, b, a_s, b_s = make_inputs(2048, 4096, 2048, mn_major=True, seed=13, device="cuda")
    outs = {}
    paths = ("smem", "pass-b") if config.startswith("2,") else ("smem",)  # pass-b: two-consumer tiles only
    for how in (*paths, "pass"):
        env.setenv("FP8GEMM_MN", how)
        outs[how] = fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    for how in paths:
        assert rel_err(outs[how], outs["pass"].double()) < 1e-3, how
        assert rel_err(outs[how], reference(a, b, a_s, b_s)) < 2e-3, how


# MN-major a read into registers as it lies, b through a pass that permutes its K (FP8GEMM_MN=pass-b):
# every tile it compiles (bn 96 and 192 cross into the next b_scale block), split-K and the tail split, tails
# in M, N and K (a multiple of 16); b MN-major (transposed by the pass) or K-major (copied by it).
AR_CONFIGS = ["2,192,1", "2,128,1", "2,96,1", "2,64,1", "2,128,3", "2,96,2", "2,64,t"]


@pytest.mark.parametrize("b_layout", ["b-mn-major", "b-k-major"])
@pytest.mark.parametrize("config", AR_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(64, 64, 128), (96, 576, 256), (272, 1008, 2320), (1024, 576, 7168)])
def test_mn_major_a_in_registers(fp8_gemm_cuda, env, config, m, n, k, b_layout):
    env.setenv("FP8GEMM_MN", "pass-b")
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, m, n, k, True, "fast", seed=m + k, k_major_b=b_layout == "b-k-major")


@pytest.mark.parametrize(
    "m,n,k,elem",
    [(6144, 576, 7168, 7), (64, 7168, 2048, 6), (6144, 7168, 2048, 0), (6144, 576, 7176, 0)],
    ids=["a-in-registers", "shared-memory", "pass", "pass-k-not-multiple-of-16"],
)
def test_mn_major_route_of_the_cost_model(fp8_gemm_cuda, env, capfd, m, n, k, elem):
    # Unforced, the MN-major choice weighs all three routes: a as it lies into registers with b through a
    # pass (elem 7, where A is most of the bytes), both transposed in shared memory (elem 6, small M) or
    # both through the transpose pass and the K-major kernel (elem 0); each correct.
    env.setenv("FP8GEMM_VERBOSE", "1")
    check(fp8_gemm_cuda, m, n, k, True, "fast", seed=m + n)
    assert f"elem={elem} " in capfd.readouterr().err


def test_mn_major_a_in_registers_needs_k_multiple_of_16(fp8_gemm_cuda, env):
    # B's K permutation works in groups of 16: other K take the transpose pass, correct all the same.
    env.setenv("FP8GEMM_MN", "pass-b")
    check(fp8_gemm_cuda, 208, 384, 1000, True, "fast", seed=5)


def test_mn_switch_is_checked(fp8_gemm_cuda, env):
    a, b, a_s, b_s = make_inputs(256, 512, 512, mn_major=True, device="cuda")
    env.setenv("FP8GEMM_MN", "fused")
    with pytest.raises(RuntimeError, match='FP8GEMM_MN must be "smem", "pass-b" or "pass", got "fused"'):
        fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    env.setenv("FP8GEMM_CONFIG", "2,128,1,n2")
    for how in ("smem", "pass-b"):
        env.setenv("FP8GEMM_MN", how)
        expected = f"FP8GEMM_MN={how} has no kernel for nc=2, bn=128, waves=1, cluster=2"
        with pytest.raises(RuntimeError, match=expected):
            fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    env.setenv("FP8GEMM_MN", "")  # unforced, a cluster tile takes the transpose pass
    check(fp8_gemm_cuda, 256, 512, 512, True, "fast")


@pytest.mark.parametrize("precision", ["fast", "strict"])
def test_fnuz_inputs(fp8_gemm_cuda, precision):
    check(fp8_gemm_cuda, 256, 576, 1024, True, precision, dtype=torch.float8_e4m3fnuz)


@pytest.mark.parametrize("config", STRICT_CONFIGS)
def test_fnuz_strict_configurations(fp8_gemm_cuda, env, config):
    # fnuz strict always takes the bf16 kernels (widened in global memory), even with FP8GEMM_STRICT_F16
    env.setenv("FP8GEMM_STRICT_F16", "1")
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, 300, 1000, 2304, False, "strict", dtype=torch.float8_e4m3fnuz, seed=11)


@pytest.mark.parametrize("config", ["2,192,1", "2,128,3,2", "1,128,1,2", "2,128,1,n2,2", "2,128,2,1,2"])
def test_register_epilogue(fp8_gemm_cuda, env, config):
    # The path taken when N % 8 != 0 or c is not 16-byte aligned, forced on shapes the TMA store also takes.
    env.setenv("FP8GEMM_REGISTER_EPILOGUE", "1")
    env.setenv("FP8GEMM_CONFIG", config)
    check(fp8_gemm_cuda, 300, 1000, 2304, True, "fast", seed=3)
    check(fp8_gemm_cuda, 1024, 576, 7168, False, "fast", seed=4)


@pytest.mark.parametrize("precision", ["fast", "strict"])
def test_allocating_call_matches_the_out_call(fp8_gemm_cuda, precision):
    m, n, k = 1024, 576, 7168
    a, b, a_s, b_s = make_inputs(m, n, k, mn_major=True, device="cuda")
    into = fp8_gemm_cuda.gemm(a, b, a_s, b_s, out=poisoned(m, n, "cuda"), precision=precision)
    new = fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision=precision)
    torch.cuda.synchronize()
    assert new.device == a.device and new.dtype == torch.bfloat16 and new.shape == (m, n)
    assert torch.equal(new, into)
    assert rel_err(new, reference(a, b, a_s, b_s)) < 2e-3


# Strict mode has no cluster or tail-split kernels: those configurations run fast only.
SPLIT_CASES = [("2,128,4", p) for p in ("fast", "strict")] + [("1,128,3", p) for p in ("fast", "strict")]
SPLIT_CASES += [("2,128,t,1,2", "fast"), ("2,128,2,n2", "fast")]


@pytest.mark.parametrize("config,precision", SPLIT_CASES)
def test_split_k_is_deterministic(fp8_gemm_cuda, env, config, precision):
    # The last split to arrive sums the partials in split order: the same bits whichever split that is.
    env.setenv("FP8GEMM_CONFIG", config)
    m, n, k = 4096, 4608, 1024  # 576 tiles of 256x128: several rounds, and a partial last one to split ("t")
    a, b, a_s, b_s = make_inputs(m, n, k, device="cuda")
    first = fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision=precision)
    for _ in range(5):
        again = fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision=precision)
        assert torch.equal(again, first)
    assert rel_err(first, reference(a, b, a_s, b_s)) < 2e-3


def test_unaligned_output_view(fp8_gemm_cuda):
    # A contiguous c whose base is 4- but not 16-byte aligned takes the register epilogue (N % 8 == 0 here).
    m, n, k = 256, 576, 512
    a, b, a_s, b_s = make_inputs(m, n, k, device="cuda")
    flat = torch.full((m * n + 2,), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = flat[2:].view(m, n)
    assert out.data_ptr() % 16 == 4
    fp8_gemm_cuda.gemm(a, b, a_s, b_s, out=out)
    torch.cuda.synchronize()
    assert flat[:2].isnan().all() and not out.isnan().any()
    assert rel_err(out, reference(a, b, a_s, b_s)) < 2e-3


def in_padded_rows(t, pad, offset):
    """t's values in a K-major view whose rows are `pad` bytes longer and whose base is `offset` bytes in."""
    rows, k = t.shape
    flat = torch.zeros(offset + rows * (k + pad), dtype=torch.uint8, device=t.device)
    view = flat[offset:].as_strided((rows, k), (k + pad, 1))
    view.copy_(t.view(torch.uint8))
    return view.view(t.dtype)


@pytest.mark.parametrize("swap", ["0", "1"], ids=["b-widened", "a-widened"])
@pytest.mark.parametrize("pad,offset", [(16, 0), (4, 4), (1, 3)], ids=["aligned", "words", "bytes"])
def test_strict_widening_pass_on_padded_rows(fp8_gemm_cuda, env, swap, pad, offset):
    # The f16 widening pass reads 16-byte groups at once only where rows and base are 16-byte aligned; padded
    # rows (4-byte words) and odd ones (bytes) must give the same bits as contiguous operands.
    env.setenv("FP8GEMM_STRICT_SWAP", swap)
    m, n, k = 192, 320, 1024
    a, b, a_s, b_s = make_inputs(m, n, k, device="cuda")
    expect = fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision="strict")
    assert strict_bad(expect, reference(a, b, a_s, b_s)) == 0
    a_p, b_p = in_padded_rows(a, pad, offset), in_padded_rows(b, pad, offset)
    assert torch.equal(fp8_gemm_cuda.gemm(a_p, b_p, a_s, b_s, precision="strict"), expect)


@pytest.mark.parametrize("precision", ["fast", "strict"])
def test_single_row_with_strided_k(fp8_gemm_cuda, precision):
    # M = 1 with stride(0) == 1 and stride(1) == 2: must be read as strided along K, not as a contiguous row.
    a, b, a_s, b_s = make_inputs(1, 256, 512, device="cuda")
    wide = torch.zeros(1024, dtype=torch.uint8, device="cuda")
    wide[::2] = a.view(torch.uint8)[0]
    strided = wide.view(a.dtype).as_strided((1, 512), (1, 2))
    expect = fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision=precision)
    assert torch.equal(fp8_gemm_cuda.gemm(strided, b, a_s, b_s, precision=precision), expect)


def test_generic_fallback(fp8_gemm_cuda, env):
    env.setenv("FP8GEMM_FORCE_GENERIC", "1")
    for mn_major in (False, True):
        check(fp8_gemm_cuda, 130, 576, 640, mn_major, "strict")


def test_fast_matches_generic_closely(fp8_gemm_cuda, env):
    a, b, a_s, b_s = make_inputs(512, 1536, 7168, device="cuda")
    fast = fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    env.setenv("FP8GEMM_FORCE_GENERIC", "1")
    exact = fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    assert rel_err(fast, exact.double()) < 2e-3


def test_fnuz_nan_propagates(fp8_gemm_cuda):
    a, b, a_s, b_s = make_inputs(128, 256, 256, torch.float8_e4m3fnuz, device="cuda")
    bits = a.view(torch.uint8).clone()
    bits[bits == 0x80] = 0
    bits[5, 7] = 0x80
    for precision in ("fast", "strict"):
        out = fp8_gemm_cuda.gemm(bits.view(torch.float8_e4m3fnuz), b, a_s, b_s, precision=precision)
        assert out[5].isnan().all() and not out[:5].isnan().any() and not out[6:].isnan().any()


def test_mixed_devices_are_named(fp8_gemm_cuda):
    a, b, a_s, b_s = make_inputs(64, 128, 256, device="cuda")
    with pytest.raises(RuntimeError, match="all tensors must be on cuda"):
        fp8_gemm_cuda.gemm(a, b, a_s.cpu(), b_s)


def test_bad_config_override_is_named(fp8_gemm_cuda, env):
    a, b, a_s, b_s = make_inputs(64, 128, 256, device="cuda")
    env.setenv("FP8GEMM_CONFIG", "4,128,1")
    with pytest.raises(RuntimeError, match="FP8GEMM_CONFIG names a tile shape that is not compiled"):
        fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    for bad in ["2,128,1,3", "2,128", "2,x,1", "2,128,1,n2,0", "2,128,1,1,3", "2,128,u"]:
        env.setenv("FP8GEMM_CONFIG", bad)
        expected = r"with splits a count or t, cluster 1, m2 \(or 2\) or n2 and waves 1 or 2 .*got \""
        with pytest.raises(RuntimeError, match=expected + bad):
            fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    env.setenv("FP8GEMM_CONFIG", "1,64,1,1,2")
    with pytest.raises(RuntimeError, match="waves=2 .FP8GEMM_CONFIG names a tile shape that is not compiled"):
        fp8_gemm_cuda.gemm(a, b, a_s, b_s)
    env.setenv("FP8GEMM_CONFIG", "2,128,1,2")
    with pytest.raises(RuntimeError, match="strict mode has no 2-CTA cluster kernels"):
        fp8_gemm_cuda.gemm(a, b, a_s, b_s, precision="strict")
