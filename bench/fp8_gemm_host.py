"""Host cost of one fp8-gemm call: enqueue time per call without synchronizing (the GPU work of these shapes
is shorter than the host's, so the queue never fills), for the kforge op on both layouts and for
torch._scaled_mm blockwise.

    python bench/fp8_gemm_host.py BUILD.so
"""

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import cublas_fn, load_ops, make_inputs  # noqa: E402


def per_call_us(fn, calls=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    host = (time.perf_counter_ns() - t0) / 1e3 / calls
    torch.cuda.synchronize()
    return host


def main():
    ops = load_ops(sys.argv[1])
    for m, n, k in [(1024, 4096, 512), (1024, 1536, 7168), (64, 2112, 7168)]:
        for mn_major in (False, True):
            a, b, a_s, b_s = make_inputs(m, n, k, mn_major)
            c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            us = per_call_us(lambda a=a, b=b, a_s=a_s, b_s=b_s, c=c: ops.gemm(a, b, a_s, b_s, c))
            layout = "mn-major" if mn_major else "k-major"
            print(f"{m}x{n}x{k} {layout}: kforge {us:.1f} us host per call", flush=True)
        try:
            us = per_call_us(cublas_fn(*make_inputs(m, n, k, False)))
            print(f"{m}x{n}x{k} k-major: torch._scaled_mm {us:.1f} us host per call", flush=True)
        except RuntimeError as e:
            print(f"{m}x{n}x{k}: torch._scaled_mm failed: {str(e).splitlines()[0]}")
        print(f"{m}x{n}x{k}: empty sync round trip {per_call_us(torch.cuda.synchronize, 100):.1f} us")


if __name__ == "__main__":
    main()
