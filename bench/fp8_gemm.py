"""Benchmarks kernels/fp8-gemm on a CUDA GPU: correctness + kernel-only median time vs torch._scaled_mm.

Usage: python bench/fp8_gemm.py SO_PATH OPS_NAMESPACE [OUT_JSON]. Only the 18 challenge shapes, K-major.
"""

import functools
import json
import math
import subprocess
import sys

import torch
import triton.testing

CHALLENGE = [(m, n, k) for m in (1024, 6144) for n, k in [
    (1536, 7168), (3072, 1536), (576, 7168), (7168, 256), (7168, 2048),
    (4608, 7168), (7168, 2304), (512, 7168), (4096, 512)]]  # fmt: skip


def cdiv(x, y):
    return (x + y - 1) // y


def inputs(m, n, k):
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    a_s = torch.randn(m, cdiv(k, 128), device="cuda")
    b_s = torch.randn(cdiv(n, 128), cdiv(k, 128), device="cuda")
    return a, b, a_s, b_s


def reference(a, b, a_s, b_s):
    m, k = a.shape
    n = b.shape[0]
    af = a.float() * a_s.repeat_interleave(128, 1)[:, :k]
    bf = b.float() * b_s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]
    return af.double() @ bf.double().T


def rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


def main():
    so, ns = sys.argv[1], sys.argv[2]
    out_json = sys.argv[3] if len(sys.argv) > 3 else None
    torch.ops.load_library(so)
    op = getattr(torch.ops, ns).gemm
    rows = []
    for m, n, k in CHALLENGE:
        a, b, a_s, b_s = inputs(m, n, k)
        ref = reference(a, b, a_s, b_s)
        c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        op(a, b, a_s, b_s, c)
        err = rel_err(c, ref)
        bad = int(((c.double() - ref).abs() > 1e-3 + 2e-2 * ref.abs()).sum())
        ours = triton.testing.do_bench(functools.partial(op, a, b, a_s, b_s, c), return_mode="median") * 1e3
        cublas_us = cublas_ok = None
        try:
            bs_t = b_s.T  # (K/128, N/128), K-contiguous as cuBLASLt wants
            cub = functools.partial(
                torch._scaled_mm, a, b.T, a_s.T.contiguous().T, bs_t, out_dtype=torch.bfloat16
            )

            cublas_ok = rel_err(cub(), ref) < 2e-3
            cublas_us = triton.testing.do_bench(cub, return_mode="median") * 1e3
        except RuntimeError as e:
            print(f"  cublas failed on {m}x{n}x{k}: {str(e)[:100]}")
        tflops = 2 * m * n * k / (ours * 1e-6) / 1e12
        rows.append(dict(M=m, N=n, K=k, layout="k-major", mode="fast", kforge_us=ours,
                         kforge_correct=err < 2e-3 and not c.isnan().any().item(), kforge_rel_err=err,
                         kforge_strict_bad=bad, kforge_tflops=tflops, cublas_us=cublas_us,
                         cublas_correct=cublas_ok))  # fmt: skip
        print(f"{m:5d} {n:5d} {k:5d} ours {ours:9.1f}us {tflops:6.1f}TF err {err:.1e} strict_bad {bad} "
              f"cublas {cublas_us or float('nan'):7.1f}us ok={cublas_ok}")  # fmt: skip
    geo = math.exp(sum(math.log(r["kforge_us"]) for r in rows) / len(rows))
    both = [r for r in rows if r["cublas_correct"]]
    ratio = (
        math.exp(sum(math.log(r["kforge_us"] / r["cublas_us"]) for r in both) / len(both)) if both else None
    )
    print(f"geomean ours {geo:.1f}us; geomean ratio ours/cublas over {len(both)} shapes: {ratio}")
    if out_json:
        meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                    nvcc=subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout[-80:],
                    timing="triton do_bench median (L2 flushed by do_bench), kernel-only, K-major",
                    geomean_us=geo, geomean_ratio_vs_cublas=ratio, records=rows)  # fmt: skip
        with open(out_json, "w") as f:
            json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
