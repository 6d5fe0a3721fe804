"""Host cost of one fp8-gemm call, broken down: for each case the enqueue time per call without synchronizing
(the GPU work of these shapes is shorter than the host's, so the queue never fills) and the challenge's wall
clock (synchronize, call, synchronize; median). Cases: the op dispatch alone (M = 0 returns before any CUDA
call), the op on both layouts, the generic kernel (no tensor maps, one plain launch), the Python wrapper on
the challenge layout (the full operator), torch._scaled_mm blockwise, and an empty synchronize.

    python bench/fp8_gemm_host.py BUILD.so
"""

import functools
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import cublas_fn, load_ops, load_wrapper, make_inputs, wall_us  # noqa: E402


def enqueue_us(fn, calls=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    host = (time.perf_counter_ns() - t0) / 1e3 / calls
    torch.cuda.synchronize()
    return host


def report(label, fn, wall=True):
    line = f"  {label:<34} enqueue {enqueue_us(fn):6.1f} us"  # warms fn up for wall_us too
    if wall:
        line += f"   wall {wall_us(fn, 100):6.1f} us"
    print(line, flush=True)


def main():
    so = sys.argv[1]
    ops = load_ops(so)
    wrapper = load_wrapper(Path(so).name.split(".")[0])
    for m, n, k in [(1024, 4096, 512), (1024, 1536, 7168), (64, 2112, 7168)]:
        print(f"{m}x{n}x{k}:", flush=True)
        report("empty synchronize", lambda: None)
        z = make_inputs(1, n, k, False)
        z = (z[0][:0], z[1], z[2][:0], z[3], torch.empty((0, n), dtype=torch.bfloat16, device="cuda"))
        report("op dispatch (M = 0)", functools.partial(ops.gemm, *z))
        for mn_major in (False, True):
            x = make_inputs(m, n, k, mn_major)
            c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            report(f"op {'mn-major' if mn_major else 'k-major'}", functools.partial(ops.gemm, *x, c))
            if mn_major:
                report("wrapper mn-major (full operator)", functools.partial(wrapper.gemm, *x))
            else:
                os.environ["FP8GEMM_FORCE_GENERIC"] = "1"
                report("op k-major, generic kernel", functools.partial(ops.gemm, *x, c), wall=False)
                del os.environ["FP8GEMM_FORCE_GENERIC"]
        try:
            report("torch._scaled_mm k-major", cublas_fn(*make_inputs(m, n, k, False)))
        except RuntimeError as e:
            print(f"  torch._scaled_mm failed: {str(e).splitlines()[0]}")


if __name__ == "__main__":
    main()
