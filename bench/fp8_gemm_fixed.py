"""Where a launch's fixed cost goes: for each shape, kforge's fast op and cuBLAS blockwise timed at several K
as do_bench (L2 flushed, events around the launch) and as their kernels' device time (torch.profiler), beside
a one-element kernel timed the same way. The K slope is the per-block cost, the intercept the fixed one; the
gap between the two timings is what the events see outside the kernels.

    python bench/fp8_gemm_fixed.py BUILD.so MxN[,MxN...] [--ks 128,512,1792,7168] [--config nc,bn,splits]
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import cublas_fn, kernel_us, load_ops, make_inputs, seed_shape, switches  # noqa: E402
from fp8_gemm_kernels import kernel_times  # noqa: E402


def fit(ks, us):
    """Least-squares (intercept, slope per 128-K block) of `us` over K."""
    line = statistics.linear_regression([k / 128 for k in ks], us)
    return line.intercept, line.slope


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("so")
    ap.add_argument("shapes", help="MxN[,MxN...]")
    ap.add_argument("--ks", default="128,512,1792,7168")
    ap.add_argument("--config", default=None, help="FP8GEMM_CONFIG for kforge (default: the model's pick)")
    args = ap.parse_args()
    ops = load_ops(args.so)
    ks = [int(k) for k in args.ks.split(",")]
    one = torch.zeros(1, device="cuda")
    tiny = lambda: one.add_(1.0)  # noqa: E731
    tiny_device = sum(kernel_times(tiny, 50, "").values())
    print(f"one-element kernel: do_bench {kernel_us(tiny):.2f} us, device {tiny_device:.2f} us", flush=True)
    env = {"FP8GEMM_CONFIG": args.config} if args.config else {}
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        rows = {"kforge": ([], []), "cublas": ([], [])}
        for k in ks:
            seed_shape(m, n, k)
            x = make_inputs(m, n, k, False)
            c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            with switches(env):
                fns = {"kforge": lambda x=x, c=c: ops.gemm(*x, c), "cublas": cublas_fn(*x)}
                for name, fn in fns.items():
                    bench, device = kernel_us(fn), sum(kernel_times(fn, 20, "").values())
                    rows[name][0].append(bench), rows[name][1].append(device)
                    print(f"{m}x{n}x{k} {name:6s}: do_bench {bench:7.2f} us, device {device:7.2f} us")
        for name, (bench, device) in rows.items():
            (b0, b1), (d0, d1) = fit(ks, bench), fit(ks, device)
            print(f"{m}x{n} {name:6s}: do_bench {b0:5.2f} + {b1:.3f} us/block; device {d0:5.2f} + {d1:.3f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
