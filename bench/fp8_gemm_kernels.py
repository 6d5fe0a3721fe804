"""Device time of each kernel one fp8-gemm call launches (operand passes, the GEMM), from torch.profiler.

    python bench/fp8_gemm_kernels.py BUILD.so MxNxK[,MxNxK...] [--mn] [--strict] [--env FP8GEMM_K=V ...]

Per shape: fresh inputs, the op checked once, then --calls calls with the L2 flushed before each (as
do_bench does); prints every kernel's mean duration per call (the flush excluded) and their sum.
"""

import argparse
import collections
import functools
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import FAST_BAR, checked, load_ops, make_inputs, reference, seed_shape, switches  # noqa: E402
from fp8_gemm_ab import env_of  # noqa: E402


@functools.cache
def l2_flush():
    """(a buffer larger than the L2, the names of the kernels zeroing it launches), made once per process."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        flush.zero_()
        torch.cuda.synchronize()
    return flush, frozenset(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def kernel_times(fn, calls, match="fp8gemm"):
    """{kernel name: mean µs per call} of `fn`'s kernels whose name holds `match` ("" for all), the L2 flush
    before each call left out."""
    flush, flush_names = l2_flush()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    totals = collections.defaultdict(float)
    for event in prof.events():
        cuda = event.device_type == torch.autograd.DeviceType.CUDA
        if cuda and match in event.name and event.name not in flush_names:
            totals[event.name] += event.time_range.elapsed_us()
    return {name: us / calls for name, us in totals.items()}


def short(name):
    """A kernel's template name without its parameter list."""
    return name.split("(")[0][:110]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("so")
    ap.add_argument("shapes", help="MxNxK[,MxNxK...]")
    ap.add_argument("--mn", action="store_true", help="the challenge's MN-major layout")
    ap.add_argument("--strict", action="store_true", help="the strict op")
    ap.add_argument("--env", action="append", default=[], metavar="FP8GEMM_K=V")
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    ops = load_ops(args.so)
    op = ops.gemm_strict if args.strict else ops.gemm
    with switches(env_of(args.env)):
        for shape in args.shapes.split(","):
            m, n, k = (int(v) for v in shape.split("x"))
            seed_shape(m, n, k)
            x = make_inputs(m, n, k, args.mn)
            c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            err, bad = checked(op, x, c, reference(*x))
            ok = bad == 0 if args.strict else err < FAST_BAR
            times = kernel_times(functools.partial(op, *x, c), args.calls)
            print(f"{shape}: {sum(times.values()):.1f} us in kernels{'' if ok else '  WRONG'}")
            for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
                print(f"  {us:8.1f} us  {short(name)}")


if __name__ == "__main__":
    main()
