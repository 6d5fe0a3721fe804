"""A/B of two fp8-gemm CUDA builds (or one build under two sets of FP8GEMM_* switches) in one process.

    python bench/fp8_gemm_ab.py A.so B.so MxNxK[,MxNxK...] [--config CFG] [--mn] [--strict]
                                [--env-a K=V ...] [--env-b K=V ...] [--no-warmup] [--json OUT]

Per shape: fresh inputs and a float64 reference; each side's output poisoned, computed and checked (fast:
relative Frobenius error < 2e-3; strict: 0 elements outside 1e-3 + 2e-2|ref|); then kernel-only times
(do_bench median, L2 flushed) in the order A, B, B, A after one discarded run, each side keeping its lower
one (the GPU clocks down under sustained load: the warm-up and the mirrored order spare both). Prints B/A per
shape, each side's worst element (|out - ref| / (1e-3 + 2e-2|ref|), strict fails above 1) and the geomean.
The two builds must have different file names (their op namespaces); pass the same .so twice to compare
switches alone.
"""

import argparse
import functools
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import (  # noqa: E402
    FAST_BAR,
    checked,
    kernel_us,
    load_ops,
    make_inputs,
    paired_us,
    reference,
    seed_shape,
    switches,
    worst_margin,
)


def env_of(items):
    """{name: value} of FP8GEMM_NAME=VALUE arguments."""
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("FP8GEMM_"):
            raise SystemExit(f"--env-a/--env-b take FP8GEMM_NAME=VALUE, got {item!r}")
        env[key] = value
    return env


def ab_shape(sides, shape, args):
    """One shape: both sides checked, then timed A, B, B, A; its record."""
    m, n, k = (int(v) for v in shape.split("x"))
    seed_shape(m, n, k)
    x = make_inputs(m, n, k, args.mn)
    ref = reference(*x)
    c = torch.empty((m, n), dtype=torch.bfloat16, device=x[0].device)
    runs, ok, worst = {}, {}, {}
    for name, ops, env in sides:
        op = ops.gemm_strict if args.strict else ops.gemm
        runs[name] = functools.partial(op, *x, c), env
        with switches(env):
            err, bad = checked(op, x, c, ref)
        ok[name] = bad == 0 if args.strict else err < FAST_BAR
        worst[name] = worst_margin(c, ref)

    def timed(name):
        fn, env = runs[name]
        with switches(env):
            return kernel_us(fn, rep=args.rep)

    a_us, b_us = paired_us("A", "B", measure=timed, warmup=args.warmup)
    rec = dict(M=m, N=n, K=k, a_us=a_us, b_us=b_us, a_correct=ok["A"], b_correct=ok["B"],
               a_worst=worst["A"], b_worst=worst["B"])  # fmt: skip
    rec["ratio"] = rec["b_us"] / rec["a_us"]
    flag = {True: "", False: " WRONG"}
    print(f"{shape:>16}  A {rec['a_us']:8.1f} us{flag[ok['A']]}  B {rec['b_us']:8.1f} us{flag[ok['B']]}  "
          f"B/A {rec['ratio']:.3f}  worst element A {worst['A']:.2f} B {worst['B']:.2f}",
          flush=True)  # fmt: skip
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="build A (.so)")
    ap.add_argument("b", help="build B (.so; the same file to compare switches)")
    ap.add_argument("shapes", help="MxNxK[,MxNxK...]")
    ap.add_argument("--config", help="FP8GEMM_CONFIG for both sides (default: the heuristic's pick)")
    ap.add_argument("--mn", action="store_true", help="the challenge's MN-major layout")
    ap.add_argument("--strict", action="store_true", help="the strict op")
    ap.add_argument("--env-a", action="append", default=[], metavar="FP8GEMM_K=V")
    ap.add_argument("--env-b", action="append", default=[], metavar="FP8GEMM_K=V")
    ap.add_argument("--rep", type=int, default=100, help="do_bench rep (ms)")
    ap.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one discarded run before A, B, B, A (default: on)",
    )
    ap.add_argument("--json", help="write the records here")
    args = ap.parse_args()

    ops_a = load_ops(args.a)
    ops_b = ops_a if Path(args.a).resolve() == Path(args.b).resolve() else load_ops(args.b)
    common = {"FP8GEMM_CONFIG": args.config} if args.config else {}
    sides = [("A", ops_a, {**common, **env_of(args.env_a)}), ("B", ops_b, {**common, **env_of(args.env_b)})]
    records = [ab_shape(sides, shape, args) for shape in args.shapes.split(",")]
    geomean = math.exp(sum(math.log(r["ratio"]) for r in records) / len(records))
    print(f"geomean B/A over {len(records)} shapes: {geomean:.3f}")
    if args.json:
        meta = dict(a=args.a, b=args.b, env_a=sides[0][2], env_b=sides[1][2], mn=args.mn, strict=args.strict)
        Path(args.json).write_text(json.dumps(dict(**meta, geomean_ratio=geomean, records=records), indent=1))


if __name__ == "__main__":
    main()
