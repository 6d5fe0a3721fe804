"""Error maps (by tile row/column/position) for sm_90a configurations on large grids, three runs each.

python bench/fp8_gemm_diag.py BUILD.so
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import checked, load_ops, make_inputs, reference  # noqa: E402

CASES = [("2,128,1", 6144, 7168, 256), ("2,64,1", 6144, 4096, 512), ("2,128,2", 1024, 7168, 2048),
         ("2,192,1", 6144, 7168, 256), ("1,128,2", 1024, 7168, 2048)]  # fmt: skip


def error_map(out, ref, bm, bn):
    bad = ~((out.double() - ref).abs() <= 1e-3 + 5e-2 * ref.abs() + 0.05 * ref.abs().mean())
    m, n = bad.shape
    rows = bad.any(1).nonzero().flatten()
    print(f"   bad elements {int(bad.sum())} / {m * n}; bad rows {len(rows)}")
    if len(rows) == 0:
        return
    tile_rows = bad.view(m // bm, bm, n).any(2).any(0).nonzero().flatten().tolist()
    cols_in_tile = bad.view(m, n // bn, bn).any(0).any(0).nonzero().flatten().tolist() if n % bn == 0 else []
    tiles = bad.view(m // bm, bm, n // bn, bn).any(3).any(1) if n % bn == 0 else None
    print(f"   rows within tile: {tile_rows[:20]}{'...' if len(tile_rows) > 20 else ''}")
    print(f"   cols within tile: {cols_in_tile[:20]}{'...' if len(cols_in_tile) > 20 else ''}")
    if tiles is not None:
        print(f"   bad tiles {int(tiles.sum())} / {tiles.numel()}: first {tiles.nonzero()[:8].tolist()}")


def main():
    ops = load_ops(sys.argv[1])
    for cfg, m, n, k in CASES:
        x = make_inputs(m, n, k, False)
        ref = reference(*x)
        os.environ["FP8GEMM_CONFIG"] = cfg
        errs = []
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        for rep in range(3):
            errs.append(checked(ops.gemm, x, c, ref)[0])
            if errs[-1] > 2e-3:
                print(f"{cfg} {m}x{n}x{k} run {rep} map:")
                nc, bn = int(cfg.split(",")[0]), int(cfg.split(",")[1])
                error_map(c, ref, 64 * nc, bn)
        errs_s = " ".join(f"{e:.2e}" for e in errs)
        print(f"{cfg} {m}x{n}x{k} rel_err {errs_s}", flush=True)
    del os.environ["FP8GEMM_CONFIG"]


if __name__ == "__main__":
    main()
