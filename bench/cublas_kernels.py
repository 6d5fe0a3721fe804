"""Which kernels cuBLASLt runs for torch._scaled_mm blockwise, and kforge's for the same shape: name, grid,
block, registers, shared memory and device time of each, read from a torch.profiler trace (one call after a
warm-up). Tells what tiling and split the anchor picked where it beats the cost model's pick.

    python bench/cublas_kernels.py BUILD.so MxNxK[,MxNxK...]
"""

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import cublas_fn, load_ops, make_inputs, seed_shape  # noqa: E402


def launches(fn):
    """(name, grid, block, registers, shared bytes, µs) of every kernel one call of `fn` runs."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.loads(Path(f.name).read_text())["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        args = e.get("args", {})
        regs, shared = args.get("registers per thread"), args.get("shared memory", 0)
        out.append((e["name"], args.get("grid"), args.get("block"), regs, shared, e["dur"]))
    return out


def main():
    ops = load_ops(sys.argv[1])
    for shape in sys.argv[2].split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        seed_shape(m, n, k)
        x = make_inputs(m, n, k, False)
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        for side, fn in (("cublas", cublas_fn(*x)), ("kforge", lambda x=x, c=c: ops.gemm(*x, c))):
            for name, grid, block, regs, shared, us in launches(fn):
                what = f"grid {grid} block {block} regs {regs} smem {shared}"
                print(f"{shape} {side}: {us:7.1f} us {what} {name[:160]}")


if __name__ == "__main__":
    main()
