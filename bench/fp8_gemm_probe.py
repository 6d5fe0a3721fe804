"""Times shapes under several FP8GEMM_CONFIG values with FP8GEMM_VERBOSE=1 (launch configuration on stderr);
small enough to run under ncu.

    python bench/fp8_gemm_probe.py BUILD.so MxNxK[,MxNxK...] CONFIG [CONFIG ...]

CONFIG "auto" leaves the choice to the heuristic. PROBE_STRICT=1 times the strict op, once per value of
PROBE_STRICT_F16 (comma-separated FP8GEMM_STRICT_F16 values, default "0"); PROBE_MN=1 passes the challenge's
MN-major layout (the op's transpose pass included); PROBE_ONCE=1 runs each configuration once, untimed (for
ncu).
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import checked, kernel_us, load_ops, make_inputs, reference  # noqa: E402


def set_env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def main():
    so, shapes, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
    ops = load_ops(so)
    strict = bool(os.environ.get("PROBE_STRICT"))
    op = ops.gemm_strict if strict else ops.gemm
    f16s = os.environ.get("PROBE_STRICT_F16", "0").split(",") if strict else ["0"]
    os.environ["FP8GEMM_VERBOSE"] = "1"
    for shape in shapes.split(","):
        m, n, k = map(int, shape.split("x"))
        x = make_inputs(m, n, k, bool(os.environ.get("PROBE_MN")))
        ref = reference(*x)
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        for f16 in f16s:
            set_env("FP8GEMM_STRICT_F16", f16)
            for cfg in configs:
                set_env("FP8GEMM_CONFIG", None if cfg == "auto" else cfg)
                err, bad = checked(op, x, c, ref)
                once = os.environ.get("PROBE_ONCE")
                us = float("nan") if once else kernel_us(lambda x=x, c=c: op(*x, c), rep=30)
                tag = f" strict_f16={f16}" if strict else ""
                print(f"{m}x{n}x{k} {cfg}{tag}: {us:.1f} us, rel err {err:.2e}, strict-bad {bad}", flush=True)


if __name__ == "__main__":
    main()
