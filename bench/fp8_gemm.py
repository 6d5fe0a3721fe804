"""Benchmarks kernels/fp8-gemm on a CUDA GPU against torch._scaled_mm blockwise (cuBLASLt), in the same run.

    python bench/fp8_gemm.py --so BUILD.so [--commit SHA] [--nvcc VERSION] [--out-dir DIR]
                             [--sweep [mn|fast|strict|mn-paths|strict-mn]]

Per shape (18 challenge + 12 DeepSeek-V3): fresh randn inputs, a float64 reference, the output poisoned with
NaN before each checked call; then
  fast   k-major / mn-major   kernel-only: triton do_bench median, L2 flushed before every launch
  strict k-major / mn-major   same timing; correct = 0 elements outside 1e-3 + 2e-2|ref|
  full-operator mn-major      the challenge's timing: synchronize, wall clock around one Python call (wrapper,
                              output allocation, layout work included), fresh inputs per call (rotated sets)
cuBLAS runs on K-major copies with the scale layouts it needs; its correctness is checked like ours (it is
wrong when K/128 is not a multiple of 4). --sweep also times every compiled tile shape x K split per shape
(FP8GEMM_CONFIG), fast and strict, and the MN-major layout's shared-memory transpose tiles against its
transpose pass, for tuning the heuristic (bench/fp8_gemm_fit.py); --sweep mn only the last. Writes
fp8-gemm-h200.json and fp8-gemm-h200.md. --sweep fast (strict) times only that mode's cost-model candidates x
splits and the heuristic's pick on K-major operands per shape, nothing else, into fp8-gemm-sweep-fast.json
(-strict.json; strict also times the swapped-role tiles, keyed swap:CONFIG). --sweep mn-paths times, on
MN-major operands, every route the MN-major choice weighs (AR_SWEEP, below) into fp8-gemm-sweep-mn-paths.json;
--sweep strict-mn the same for strict mode (a copied K-major, the roles swapped, a read as it lies:
"ar:CONFIG").
"""

import argparse
import contextlib
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import fp8_gemm_fit as fit  # the cost models' candidate tiles (the strict sweeps time them)
import torch
import triton
import triton.testing

CHALLENGE = [(m, n, k) for m in (1024, 6144) for n, k in [
    (1536, 7168), (3072, 1536), (576, 7168), (7168, 256), (7168, 2048),
    (4608, 7168), (7168, 2304), (512, 7168), (4096, 512)]]  # fmt: skip
DEEPSEEK = [(m, n, k) for m in (64, 128, 4096) for n, k in [
    (2112, 7168), (24576, 1536), (32768, 512), (7168, 16384)]]  # fmt: skip
# "nc,bn,splits,cluster,waves": the compiled fast tile shapes without a cluster (not 128x144, which never won
# a sweep), and cluster variants (m2 pairs M blocks sharing B, n2 pairs N blocks sharing A).
# (nc, bn, waves)
_TILES = [(2, 192, 1), (2, 128, 1), (2, 64, 1), (1, 128, 1), (2, 128, 2), (3, 128, 1), (2, 96, 1), (1, 64, 1),
          (1, 96, 1)]  # fmt: skip
_CLUSTERED = [("2,128", "n2,2"), ("2,128", "m2,2"), ("2,192", "m2,1"), ("2,128", "n2,1"), ("2,128", "m2,1"),
              ("3,128", "n2,1"), ("3,128", "m2,1")]  # fmt: skip
# Splits "t": full waves unsplit, the partial last wave's tiles split (opt-in, not weighed by the cost model).
SWEEP = (
    [f"{nc},{bn},{s},1,{w}" for nc, bn, w in _TILES for s in (1, 2, 4)]
    + [f"{tile},{s},{cl}" for tile, cl in _CLUSTERED for s in (1, 2, "t")]
    + ["2,128,t,1,2"]
)
# `--sweep fast`: only the cost model's K-major candidates (kFp8Shapes in gemm_cuda.cu) x splits (1, 2, 4 and,
# unclustered, "t"), enough for bench/fp8_gemm_fit.py.
FAST_MODEL_SWEEP = [f"{nc},{bn},{s},1,{w}" for nc, bn, w in _TILES for s in (1, 2, 4, "t")] + [
    f"2,192,{s},m2,1" for s in (1, 2, 4)
]
# MN-major operands transposed in shared memory (FP8GEMM_MN=smem): its compiled tiles x K split; the sweep
# also times the transpose pass with the K-major kernels' pick ("pass").
MN_SWEEP = [f"{tile},{s},1,1" for tile in ("2,128", "2,64", "1,128") for s in (1, 2, 4)]
# `--sweep mn-paths`: the three MN-major routes per shape, for bench/fp8_gemm_fit.py --mode ar: MN_SWEEP
# (shared memory), the transpose pass with the K-major pick ("pass") and A read in place into registers with
# B through a pass (FP8GEMM_MN=pass-b, Elem::kE4M3AR): its compiled tiles x K split, keyed "ar:CONFIG".
AR_SWEEP = [f"{tile},{s},1,1" for tile in ("2,192", "2,128", "2,64", "2,96") for s in (1, 2, 4)]
# Strict mode (16-bit kernels): every tile of kF16AShapes (fp8_gemm_fit's copy, which a CPU test holds to
# gemm_cuda.cu) x K split (1, 2, 4 and "t", the split last wave its cost model weighs), no clusters, with the
# operand roles as given (FP8GEMM_STRICT_SWAP=0: a forced tile the swapped kernels also compile would
# otherwise run swapped where the model swaps); then kF16ASwapShapes' tiles swapped, keyed "swap:CONFIG" (the
# configuration on the swapped problem: bench/fp8_gemm_fit.py --mode swap).
STRICT_SWEEP, STRICT_SWAP_SWEEP = (
    [fit.config_key(tile, s) for tile in fit.parse_shapes(fit.DEFAULT_SHAPES[mode]) for s in (1, 2, 4, "t")]
    for mode in ("strict", "swap")
)
UNSWAPPED = {"FP8GEMM_STRICT_SWAP": "0"}
# `--sweep strict-mn`: MN-major operands, strict mode's three routes: STRICT_SWEEP with a copied K-major
# (FP8GEMM_MN=pass, unswapped), the swapped tiles, and the same tiles with a read as it lies
# (FP8GEMM_MN=pass-b, Elem::kF16AR, which compiles kF16AShapes' tiles), keyed "ar:CONFIG".
STRICT_COPY_A = {**UNSWAPPED, "FP8GEMM_MN": "pass"}
FAST_BAR = 2e-3  # relative Frobenius error
TIMING = (
    "kernel-only = triton.testing.do_bench median (L2 flushed before each launch, warmup 25 ms, rep 100 ms); "
    "full-operator = median wall clock of 30 synchronized Python calls, mn-major inputs rotated over 4 fresh "
    "sets; cuBLAS = torch._scaled_mm blockwise 1x128/128x128 on K-major operands, same process, same inputs "
    "(k-major a_scale stored M-contiguous for both, as cuBLASLt requires); fast k-major and cuBLAS are timed "
    "in the order cuBLAS (discarded), kforge, cuBLAS, cuBLAS, kforge and each keeps its lower median"
)


def cdiv(x, y):
    return (x + y - 1) // y


def make_inputs(m, n, k, mn_major):
    if mn_major:  # the challenge layout: (K, M) / (K, N) storage viewed transposed; scales likewise
        a = torch.randn(k, m, device="cuda").to(torch.float8_e4m3fn).T
        b = torch.randn(k, n, device="cuda").to(torch.float8_e4m3fn).T
        a_s = torch.randn(cdiv(k, 128), m, device="cuda").T
        b_s = torch.randn(cdiv(k, 128), cdiv(n, 128), device="cuda").T
    else:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        # a_scale stored M-contiguous: the layout cuBLASLt blockwise requires, so both get the same tensor
        a_s = torch.randn(cdiv(k, 128), m, device="cuda").T
        b_s = torch.randn(cdiv(n, 128), cdiv(k, 128), device="cuda")
    return a, b, a_s, b_s


def reference(a, b, a_s, b_s):
    m, k = a.shape
    n = b.shape[0]
    af = a.double() * a_s.double().repeat_interleave(128, 1)[:, :k]
    bf = b.double() * b_s.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]
    return af @ bf.T


def seed_shape(m, n, k):
    """Seeds torch so that a shape gets the same inputs in every script and run."""
    torch.manual_seed(m * 31 + n * 7 + k)


@contextlib.contextmanager
def switches(env):
    """The FP8GEMM_* variables of `env` set for the block, the previous values restored after."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def checked(op, x, c, ref):
    """`op(*x, c)` with `c` poisoned first; (relative error, strict-bad elements) of c against `ref`."""
    c.fill_(float("nan"))
    op(*x, c)
    return verdict(c, ref)


def verdict(out, ref):
    err = float((out.double() - ref).norm() / ref.norm())
    bad = int((~((out.double() - ref).abs() <= 1e-3 + 2e-2 * ref.abs())).sum())
    return err, bad


def worst_margin(out, ref):
    """max |out - ref| / (1e-3 + 2e-2 |ref|): how close the worst element comes to failing strict (1.0)."""
    return float(((out.double() - ref).abs() / (1e-3 + 2e-2 * ref.abs())).max())


def kernel_us(fn, rep=100):
    return triton.testing.do_bench(fn, warmup=min(25, rep), rep=rep, return_mode="median") * 1e3


def tflops(m, n, k, us):
    return 2 * m * n * k / (us * 1e-6) / 1e12 if us else None


def cublas_fn(a, b, a_s, b_s):
    """torch._scaled_mm blockwise on K-major operands, scales in the layouts it accepts."""
    scale_a = a_s.T.contiguous().T  # (M, K/128), outer-dim-major
    scale_b = b_s.T  # (K/128, N/128), K-contiguous
    return lambda: torch._scaled_mm(a, b.T, scale_a, scale_b, out_dtype=torch.bfloat16)


def cublas_case(m, n, k, a, b, a_s, b_s, ref):
    """torch._scaled_mm blockwise on K-major operands: (fn, correct) or (None, None) where it refuses."""
    try:
        fn = cublas_fn(a, b, a_s, b_s)
        err, _ = verdict(fn(), ref)
        return fn, err < FAST_BAR
    except RuntimeError as e:
        print(f"  cuBLAS refused {m}x{n}x{k}: {str(e).splitlines()[0][:120]}")
        return None, None


def paired_us(first, second, measure=kernel_us, warmup=True):
    """`measure` (kernel-only times) of two sides in the order first, second, second, first; the lower of
    each pair. The GPU clocks down under sustained load, so whichever runs later is slower: the mirrored
    order spares both. A discarded run of `second` comes first: without it `first`'s first run alone got the
    cooler GPU (an A/A of one build: geomean 1.006 without, 0.998 with it;
    results/logs/fp8-gemm-tile-boundary-2026-12-04.log)."""
    if warmup:
        measure(second)
    a1, b1 = measure(first), measure(second)
    b2, a2 = measure(second), measure(first)
    return min(a1, a2), min(b1, b2)


def wall_us(fn, calls):
    """Challenge timing: median wall clock of one call between synchronizes (no warm-up here)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(times)


def full_operator_us(gemm, m, n, k, sets=4, iters=30):
    """wall_us of the operator, inputs rotated so none stays cached."""
    data = [make_inputs(m, n, k, True) for _ in range(sets)]
    gemm(*data[0])
    rotation = itertools.cycle(data)
    return wall_us(lambda: gemm(*next(rotation)), iters)


def sweep_shape(op, x, ref, configs, extra, env=None):
    """Every configuration in `configs` (FP8GEMM_CONFIG, with `env`) of `op`, then the `extra` (env, name)
    cases."""
    m, n = x[0].shape[0], x[1].shape[0]
    c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    mn = {"FP8GEMM_MN": "smem"} if x[0].stride(0) == 1 else {}
    cases = [({"FP8GEMM_CONFIG": cfg, **mn, **(env or {})}, cfg) for cfg in configs] + extra
    out = {}
    for env, name in cases:
        with switches(env):
            err, bad = checked(op, x, c, ref)
            out[name] = dict(us=kernel_us(lambda: op(*x, c), rep=30), rel_err=err, strict_bad=bad)
    return out


def run_shape(mod, ops, m, n, k, sweep):
    recs = []
    for layout in ("k-major", "mn-major"):
        x = make_inputs(m, n, k, layout == "mn-major")
        a, b, a_s, b_s = x
        ref = reference(*x)
        cub_fn = cub_us = cub_ok = None
        if layout == "k-major":
            cub_fn, cub_ok = cublas_case(m, n, k, a, b, a_s, b_s, ref)
        for mode, op in (("fast", ops.gemm), ("strict", ops.gemm_strict)):
            c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            err, bad = checked(op, x, c, ref)
            correct = err < FAST_BAR if mode == "fast" else bad == 0
            fn = lambda op=op, c=c, x=x: op(*x, c)  # noqa: E731
            if mode == "fast" and cub_fn is not None:  # the anchor alongside (strict records repeat it)
                us, cub_us = paired_us(fn, cub_fn)
            else:
                us = kernel_us(fn)
            recs.append(dict(M=m, N=n, K=k, layout=layout, mode=mode, kforge_us=us, kforge_correct=correct,
                             kforge_rel_err=err, kforge_strict_bad=bad, kforge_tflops=tflops(m, n, k, us),
                             cublas_us=cub_us, cublas_correct=cub_ok,
                             cublas_tflops=tflops(m, n, k, cub_us)))  # fmt: skip
        if sweep == "all" and layout == "k-major":
            regepi = [({"FP8GEMM_REGISTER_EPILOGUE": "1"}, "auto-regepi")]
            recs[-2]["sweep"] = sweep_shape(ops.gemm, x, ref, SWEEP, regepi)
            recs[-1]["sweep"] = sweep_shape(
                ops.gemm_strict, x, ref, STRICT_SWEEP, strict_swap_cases(), UNSWAPPED
            )
        if sweep and layout == "mn-major":
            recs[-2]["sweep"] = sweep_shape(ops.gemm, x, ref, MN_SWEEP, [({"FP8GEMM_MN": "pass"}, "pass")])
    full = full_operator_us(mod.gemm, m, n, k)
    recs.append(dict(M=m, N=n, K=k, layout="mn-major", mode="full-operator", kforge_us=full,
                     kforge_correct=recs[2]["kforge_correct"], kforge_tflops=tflops(m, n, k, full),
                     cublas_us=None, cublas_correct=None))  # fmt: skip
    return recs


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarise(records):
    ch = {(m, n, k) for m, n, k in CHALLENGE}

    def pick(mode, layout, shapes):
        return [
            r
            for r in records
            if r["mode"] == mode and r["layout"] == layout and (r["M"], r["N"], r["K"]) in shapes
        ]

    def geo_us(mode, layout):
        return geomean([r["kforge_us"] for r in pick(mode, layout, ch)])

    fast_k = pick("fast", "k-major", ch)
    both = [r for r in fast_k if r["cublas_correct"]]
    s = dict(
        challenge_fast_kmajor_geomean_us=geomean([r["kforge_us"] for r in fast_k]),
        challenge_fast_kmajor_all_correct=all(r["kforge_correct"] for r in fast_k),
        challenge_cublas_correct_shapes=len(both),
        challenge_fast_kmajor_geomean_us_on_cublas_shapes=geomean([r["kforge_us"] for r in both]),
        challenge_cublas_geomean_us=geomean([r["cublas_us"] for r in both]),
        challenge_ratio_vs_cublas=geomean([r["kforge_us"] / r["cublas_us"] for r in both]),
        challenge_fast_mnmajor_geomean_us=geo_us("fast", "mn-major"),
        challenge_full_operator_geomean_us=geo_us("full-operator", "mn-major"),
        challenge_strict_kmajor_geomean_us=geo_us("strict", "k-major"),
        challenge_strict_mnmajor_geomean_us=geo_us("strict", "mn-major"),
        strict_all_correct=all(r["kforge_correct"] for r in records if r["mode"] == "strict"),
    )  # fmt: skip
    ds = pick("fast", "k-major", set(DEEPSEEK))
    s["deepseek_fast_kmajor_geomean_tflops"] = geomean([r["kforge_tflops"] for r in ds])
    s["deepseek_cublas_geomean_tflops"] = geomean([r["cublas_tflops"] for r in ds if r["cublas_correct"]])
    for m, n, k in [(6144, 4608, 7168), (4096, 7168, 16384)]:
        r = next((r for r in records if (r["M"], r["N"], r["K"]) == (m, n, k) and r["mode"] == "fast"
                  and r["layout"] == "k-major"), None)  # fmt: skip
        if r:
            s[f"tflops_{m}x{n}x{k}"] = r["kforge_tflops"]
    return s


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def markdown(meta, records, summary):
    lines = [
        f"# fp8-gemm on {meta['device']} (commit {meta['commit']})",  # the file keeps its name on any card
        "",
        f"commit `{meta['commit']}`, {meta['device']}, driver {meta['driver']}, torch {meta['torch']}, "
        f"CUDA {meta['cuda']}, nvcc {meta['nvcc']}, triton {meta['triton']}; {meta['date']}.",
        "",
        f"Timing: {meta['timing']}",
        "",
        "## Summary",
        "",
        *[f"- {k}: {fmt(v, '.4g') if isinstance(v, float) else v}" for k, v in summary.items()],
        "",
        "## Per shape (µs; TFLOPS in parentheses; ✗ = failed its check)",
        "",
        "| M | N | K | fast k-major | fast mn-major | strict k-major | strict mn-major | full-op mn-major "
        "| cuBLAS k-major |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    by_shape = {}
    for r in records:
        by_shape.setdefault((r["M"], r["N"], r["K"]), {})[(r["mode"], r["layout"])] = r

    def cell(r, us_key="kforge_us", ok_key="kforge_correct"):
        if r is None or r.get(us_key) is None:
            return "–"
        mark = "" if r.get(ok_key) else " ✗"
        return f"{r[us_key]:.1f} ({tflops(r['M'], r['N'], r['K'], r[us_key]):.0f}){mark}"

    for (m, n, k), d in by_shape.items():
        fk = d.get(("fast", "k-major"))
        lines.append(
            f"| {m} | {n} | {k} | {cell(fk)} | {cell(d.get(('fast', 'mn-major')))} | "
            f"{cell(d.get(('strict', 'k-major')))} | {cell(d.get(('strict', 'mn-major')))} | "
            f"{cell(d.get(('full-operator', 'mn-major')))} | {cell(fk, 'cublas_us', 'cublas_correct')} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--so", required=True, help="the fp8-gemm CUDA build (.so) to load")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--nvcc", default="unknown", help="nvcc version the .so was built with")
    ap.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--shapes", choices=["challenge", "deepseek", "all"], default="all")
    ap.add_argument("--sweep", nargs="?", const="all",
                    choices=["all", "mn", "fast", "strict", "mn-paths", "strict-mn"],
                    help="also time configurations (fast, strict, mn-paths: only those)")  # fmt: skip
    args = ap.parse_args()

    ops = load_ops(args.so)
    mod = load_wrapper(Path(args.so).name.split(".")[0])
    shapes = {"challenge": CHALLENGE, "deepseek": DEEPSEEK, "all": CHALLENGE + DEEPSEEK}[args.shapes]
    records = []
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.sweep in ("fast", "strict", "mn-paths", "strict-mn"):
        meta = run_meta(args)
        for m, n, k in shapes:
            records.append(sweep_model_shape(ops, m, n, k, args.sweep))
            # Rewritten after every shape: what is swept survives a timeout of the device call.
            doc = dict(**meta, records=records)
            (out / f"fp8-gemm-sweep-{args.sweep}.json").write_text(json.dumps(doc, indent=1))
        return
    for m, n, k in shapes:
        seed_shape(m, n, k)
        recs = run_shape(mod, ops, m, n, k, args.sweep)
        records += recs
        # What is measured so far survives a timeout of the device call.
        (out / "fp8-gemm-h200.partial.json").write_text(json.dumps(records, indent=1))
        f = recs[0]
        print(f"{m:5d} {n:5d} {k:5d} fast {f['kforge_us']:8.1f}us {f['kforge_tflops']:6.0f}TF "
              f"err {f['kforge_rel_err']:.2e} ok={f['kforge_correct']} | mn {recs[2]['kforge_us']:8.1f} | "
              f"strict {recs[1]['kforge_us']:8.1f} bad={recs[1]['kforge_strict_bad']} | "
              f"full {recs[4]['kforge_us']:8.1f}"
              f" | cublas {fmt(f['cublas_us'], '8.1f')} ok={f['cublas_correct']}", flush=True)  # fmt: skip
    meta = run_meta(args)
    summary = summarise(records)
    for k, v in summary.items():
        print(f"{k}: {v}")
    (out / "fp8-gemm-h200.partial.json").unlink()
    doc = dict(**meta, summary=summary, records=records)
    (out / "fp8-gemm-h200.json").write_text(json.dumps(doc, indent=1))
    (out / "fp8-gemm-h200.md").write_text(markdown(meta, records, summary))


def run_meta(args):
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    return dict(commit=args.commit, device=torch.cuda.get_device_name(), driver=smi, torch=torch.__version__,
                cuda=torch.version.cuda, nvcc=args.nvcc, triton=triton.__version__,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                env={k: v for k, v in os.environ.items() if k.startswith("FP8GEMM_") and k != "FP8GEMM_SO"},
                timing=TIMING)  # fmt: skip


def strict_swap_cases():
    """sweep_shape's extra cases: the swapped strict tiles, keyed "swap:CONFIG"."""
    forced = {"FP8GEMM_STRICT_SWAP": "1"}
    return [({"FP8GEMM_CONFIG": cfg, **forced}, fit.SWAPPED + cfg) for cfg in STRICT_SWAP_SWEEP]


def read_as_it_lies_cases(configs):
    """sweep_shape's cases of an MN-major a read into registers as it lies (FP8GEMM_MN=pass-b)."""
    return [({"FP8GEMM_CONFIG": cfg, "FP8GEMM_MN": "pass-b"}, fit.AR_PREFIX + cfg) for cfg in configs]


def mn_path_cases():
    """sweep_shape's extra cases on MN-major operands: the transpose pass, kE4M3AR's tiles."""
    return [({"FP8GEMM_MN": "pass"}, "pass"), *read_as_it_lies_cases(AR_SWEEP)]


def strict_mn_cases():
    """sweep_shape's extra cases for strict mode on MN-major operands: the swapped tiles, kF16AR's tiles."""
    return [*strict_swap_cases(), *read_as_it_lies_cases(STRICT_SWEEP)]


def sweep_model_shape(ops, m, n, k, mode):
    """`--sweep fast|strict|mn-paths`: the heuristic's pick and the cost model's candidates x splits
    (FAST_MODEL_SWEEP or STRICT_SWEEP on K-major operands; mn-paths: every MN-major route), one record."""
    # Per mode: precision, configurations, extra cases, switches for all of them, MN-major operands.
    strict, configs, extra, env, mn = {
        "fast": (False, FAST_MODEL_SWEEP, [], None, False),
        "strict": (True, STRICT_SWEEP, strict_swap_cases(), UNSWAPPED, False),
        "mn-paths": (False, MN_SWEEP, mn_path_cases(), None, True),
        "strict-mn": (True, STRICT_SWEEP, strict_mn_cases(), STRICT_COPY_A, True),
    }[mode]
    op = ops.gemm_strict if strict else ops.gemm
    seed_shape(m, n, k)
    x = make_inputs(m, n, k, mn)
    ref = reference(*x)
    c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    err, bad = checked(op, x, c, ref)
    us = kernel_us(lambda: op(*x, c), rep=30)
    correct = bad == 0 if strict else err < FAST_BAR
    layout = "mn-major" if mn else "k-major"
    rec = dict(M=m, N=n, K=k, layout=layout, mode="strict" if strict else "fast", kforge_us=us,
               kforge_correct=correct, kforge_rel_err=err, kforge_strict_bad=bad,
               sweep=sweep_shape(op, x, ref, configs, extra, env))  # fmt: skip
    best = min(rec["sweep"].items(), key=lambda kv: kv[1]["us"])
    print(f"{m:5d} {n:5d} {k:5d} auto {us:7.1f}us  best {best[0]} {best[1]['us']:7.1f}us", flush=True)
    return rec


def load_ops(so):
    """The op namespace of a `kforge build` .so (named after the file)."""
    torch.ops.load_library(so)
    return getattr(torch.ops, Path(so).name.split(".")[0])


def load_wrapper(ns):
    """Imports the package's Python wrapper over the loaded ops, laid out as `kforge build` emits it."""
    import importlib
    import tempfile

    # Its own package name: "fp8_gemm" is this module's when another bench script imports it.
    root = Path(tempfile.mkdtemp()) / "fp8_gemm_wrapper"
    root.mkdir()
    src = Path(__file__).resolve().parent.parent / "kernels/fp8-gemm/torch-ext/fp8_gemm/__init__.py"
    (root / "__init__.py").write_text(src.read_text())
    (root / "_ops.py").write_text(
        f"import torch\nops = torch.ops.{ns}\n\n"
        f"def add_op_namespace_prefix(op_name):\n    return '{ns}::' + op_name\n"
    )
    sys.path.insert(0, str(root.parent))
    return importlib.import_module("fp8_gemm_wrapper")


if __name__ == "__main__":
    main()
