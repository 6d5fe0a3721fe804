"""Times one shape under several FP8GEMM_CONFIG values with FP8GEMM_VERBOSE=1 (launch configuration on
stderr); small enough to run under ncu.

    python bench/fp8_gemm_probe.py BUILD.so M N K CONFIG [CONFIG ...]
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import kernel_us, load_ops, make_inputs, reference, verdict  # noqa: E402


def main():
    so, m, n, k, configs = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5:]
    ops = load_ops(so)
    x = make_inputs(m, n, k, False)
    ref = reference(*x)
    c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    os.environ["FP8GEMM_VERBOSE"] = "1"
    for cfg in configs:
        os.environ["FP8GEMM_CONFIG"] = cfg
        ops.gemm(*x, c)
        torch.cuda.synchronize()
        err, _ = verdict(c, ref)
        us = kernel_us(lambda: ops.gemm(*x, c), rep=30) if not os.environ.get("PROBE_ONCE") else float("nan")
        print(f"{m}x{n}x{k} {cfg}: {us:.1f} us, rel err {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
