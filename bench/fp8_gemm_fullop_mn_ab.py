"""Full-operator A/B of fast mode's MN-major paths (FP8GEMM_MN=pass, smem, pass-b) on the challenge layout.

    python bench/fp8_gemm_fullop_mn_ab.py SO [--shapes challenge|deepseek|all] [--rounds 3]
                                             [--paths pass,smem[,pass-b]]

Per shape, as bench/fp8_gemm.py's full-operator column (median wall clock of synchronized wrapper calls,
fresh MN-major inputs rotated over 4 sets): each path once, then `--rounds` more of each interleaved, each
keeping its lowest median. Prints one line per shape, "MxNxK full-op pass P smem S [pass-b B] ratio S/P", the
format that tests/test_cost_model.py reads to judge gemm_cuda.cu's choice between the paths end to end.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import CHALLENGE, DEEPSEEK, full_operator_us, load_ops, load_wrapper, switches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("so", help="the fp8-gemm CUDA build (.so)")
    ap.add_argument("--shapes", choices=["challenge", "deepseek", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timings of each path after the first")
    ap.add_argument("--paths", default="pass,smem", help="FP8GEMM_MN values (pass, smem first)")
    args = ap.parse_args()
    load_ops(args.so)
    mod = load_wrapper(Path(args.so).name.split(".")[0])
    shapes = {"challenge": CHALLENGE, "deepseek": DEEPSEEK, "all": CHALLENGE + DEEPSEEK}[args.shapes]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {Path(args.so).name}")
    paths = args.paths.split(",")
    if paths[:2] != ["pass", "smem"] or not set(paths) <= {"pass", "smem", "pass-b"}:
        ap.error(f"--paths: pass,smem first, then pass-b if wanted; got {args.paths!r}")
    for m, n, k in shapes:
        best = {}
        for _ in range(args.rounds + 1):
            for path in paths:
                with switches({"FP8GEMM_MN": path}):
                    us = full_operator_us(mod.gemm, m, n, k)
                best[path] = min(best.get(path, us), us)
        times = " ".join(f"{path} {best[path]:.1f}" for path in paths)
        print(f"{m}x{n}x{k} full-op {times} ratio {best['smem'] / best['pass']:.3f}", flush=True)


if __name__ == "__main__":
    main()
