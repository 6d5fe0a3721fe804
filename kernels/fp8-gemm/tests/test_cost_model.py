"""The sm_90a cost model (choose() and the MN-major choice in gemm_cuda.cu) against the H200 sweeps kept in
bench/results/logs: bench/fp8_gemm_fit.py mirrors its constants, and its picks must stay as close to the swept
best as the docs say. Pure Python on recorded data: runs in CI without a GPU."""

import json
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "bench/results/logs"
SOURCE = (ROOT / "kernels/fp8-gemm/gemm_cuda/gemm_cuda.cu").read_text()
SM90_SOURCE = (ROOT / "kernels/fp8-gemm/gemm_cuda/gemm_sm90.cuh").read_text()
sys.path.insert(0, str(ROOT / "bench"))
import fp8_gemm_fit as fit  # noqa: E402

NUMBER = r"([0-9.e+]+)"


UNITS_MAX_BLOCKS = re.search(r"constexpr int kUnitsMaxBlocks = (\d+);", SM90_SOURCE).group(1)


def shapes_in_source(name):
    """(shapes as fp8_gemm_fit spells them, µs per block) of a `constexpr Shape name[]` table."""
    body = re.search(rf"constexpr Shape {name}\[\] = \{{(.*?)\}};", SOURCE, re.S).group(1)
    rows = re.findall(rf"\{{(\d+), (\d+), (\d+), (\d+), (\d+), {NUMBER}(?:, (\w+))?\}}", body)
    assert rows, f"no entries parsed from {name}"
    limits = [{"": "", "kUnitsMaxBlocks": "," + UNITS_MAX_BLOCKS}[r[6]] for r in rows]
    shapes = ";".join(",".join(r[:5]) + limit for r, limit in zip(rows, limits, strict=True))
    return shapes, [float(r[5]) for r in rows]


def split_in_source(name):
    return tuple(float(v) for v in re.search(rf"{name}\{{{NUMBER}, {NUMBER}\}}", SOURCE).groups())


def widen_pass_in_source():
    rate = re.search(rf"constexpr double kPassBytesPerUs = {NUMBER};", SOURCE).group(1)
    fixed = re.search(rf"3\.0 \* double\(rows\) \* K / kPassBytesPerUs \+ {NUMBER};", SOURCE).group(1)
    return float(rate), float(fixed)


def transpose_in_source():
    rate, fixed = re.search(rf"\* K / {NUMBER} \+ {NUMBER} \+ kPassHostUs;", SOURCE).groups()
    host = re.search(rf"constexpr double kPassHostUs = {NUMBER};", SOURCE).group(1)
    return (float(rate), float(fixed)), float(host)


def test_fit_script_mirrors_the_constants_of_gemm_cuda():
    shapes, us = shapes_in_source("kFp8Shapes")
    assert (shapes, us) == (fit.FAST_SHAPES, fit.FAST_US)
    assert shapes_in_source("kF16AShapes")[0] == fit.DEFAULT_SHAPES["strict"]
    assert shapes_in_source("kF16AShapes")[1] == fit.STRICT_US
    assert shapes_in_source("kF16ARShapes") == (fit.DEFAULT_SHAPES["strict-ar"], fit.STRICT_AR_US)
    assert shapes_in_source("kBf16Shapes")[0] == fit.DEFAULT_SHAPES["bf16"]
    assert shapes_in_source("kFp8MNShapes") == (fit.DEFAULT_SHAPES["mn"], fit.MN_US)
    assert shapes_in_source("kFp8ARShapes")[0] == fit.DEFAULT_SHAPES["ar"]
    assert split_in_source("kFp8Split") == fit.SPLIT["fast"]
    assert split_in_source("kBf16Split") == fit.SPLIT["strict"] == fit.SPLIT["bf16"]
    assert transpose_in_source()[0] == fit.TRANSPOSE
    assert widen_pass_in_source() == fit.WIDEN
    assert shapes_in_source("kF16ASwapShapes") == (fit.DEFAULT_SHAPES["swap"], fit.SWAP_US)


# (mode, sweep, swept shapes, bound on the geomean of pick / swept best): the fitted-to sweeps and held-out
# ones, with the margins the docs and gemm_cuda.cu's comments state (0.9 % and 1.8 % fast, 0.9 % the bf16
# path, 0.01 % MN-major held out). Strict: 2.2 % on the sweep that timed the split last wave (its model weighs
# it; the H200's timings of the large shapes moved by up to 10 % within that sweep), 1.2 % on the earlier one,
# which did not (such picks are judged unsplit there); the swapped tiles 0.9 % on the 30 shapes, 0.4 % on the
# eight M <= 128 ones of the sweep before (timed before their TMA-store epilogue).
CASES = [
    ("fast", "fp8-gemm-sweep-fast-0dbb803.json", 30, 1.010),
    ("fast", "fp8-gemm-sweep-0be2a4c.json", 30, 1.019),
    ("fast", "fp8-gemm-sweep-1032018.json", 30, 1.019),
    ("fast", "fp8-gemm-sweep-fast-h100-ae5bb64.json", 30, 1.026),
    ("fast", "fp8-gemm-sweep-fast-h100-c253291.json", 30, 1.023),  # held out: another H100, same kernels
    ("strict", "fp8-gemm-sweep-strict-tail.json", 30, 1.022),
    ("strict", "fp8-gemm-sweep-strict-merged.json", 30, 1.012),
    ("swap", "fp8-gemm-sweep-strict-tail.json", 30, 1.009),
    ("swap", "fp8-gemm-sweep-strict-swapped-02ebca0.json", 8, 1.004),
    ("bf16", "fp8-gemm-sweep-0be2a4c.json", 30, 1.010),
    ("bf16", "fp8-gemm-sweep-1032018.json", 30, 1.006),
    # Kernel-only, the pass's host cost left out (the model adds it, so it takes shared memory on a few shapes
    # where the pass's kernels alone are faster), on an H100: the first sweep of the two-consumer tiles with A
    # in registers (Elem::kE4M3TR); the constants were scaled by an A/B of those kernels, the 128x64 tile's
    # raised after this sweep (gemm_cuda.cu). The earlier MN-major sweeps timed kE4M3T's two-consumer tiles,
    # no longer built.
    ("mn", "fp8-gemm-sweep-mn-h100-0501eb8.json", 30, 1.021),
    # The three MN-major routes (kE4M3AR's constants fitted to it; the others fixed), H100, kernel-only.
    ("ar", "fp8-gemm-sweep-mn-paths-h100-956d56c.json", 30, 1.017),
]


@pytest.mark.parametrize("mode,sweep,expected,bound", CASES)
def test_picks_stay_close_to_the_swept_best(mode, sweep, expected, bound):
    recs = fit.load_records(LOGS / sweep, mode)
    assert len(recs) == expected, f"{sweep}: {expected} {mode} shapes expected, {len(recs)} found"
    shapes = fit.parse_shapes(fit.DEFAULT_SHAPES[mode])
    if mode in ("mn", "ar"):
        table = "kFp8MNShapes" if mode == "mn" else "kFp8ARShapes"
        us, consts = shapes_in_source(table)[1], transpose_in_source()[0]
    else:
        tables = {"fast": "kFp8Shapes", "strict": "kF16AShapes", "bf16": "kBf16Shapes"}
        us, consts = shapes_in_source(tables.get(mode, "kF16ASwapShapes"))[1], fit.SPLIT[mode]
    # A sweep that never timed a candidate (the 128x96 tile before 0dbb803) judges the model without it.
    geomean, _ = fit.quality(recs, shapes, us, consts)
    assert geomean <= bound, f"{mode} on {sweep}: pick / swept best {geomean:.4f} > {bound}"


def test_mn_major_choice_is_the_faster_path_end_to_end():
    # The interleaved full-operator A/B of the pass and shared-memory routes (H100, 0501eb8; it did not time
    # pass-b, the third route, which the "ar" case above judges): with kPassHostUs the model's choice between
    # those two costs 1.0021x the faster one's time in geomean, as gemm_cuda.cu states; one shape on the
    # slower route, by less than 7 %.
    shapes = fit.parse_shapes(fit.DEFAULT_SHAPES["mn"])
    us = shapes_in_source("kFp8MNShapes")[1]
    transpose, host = transpose_in_source()
    rows = re.findall(
        r"^(\d+)x(\d+)x(\d+) full-op pass ([\d.]+) smem ([\d.]+)",
        (LOGS / "fp8-gemm-fullop-mn-ab-h100-0501eb8.log").read_text(),
        re.M,
    )
    assert len(rows) == 30
    losses, slower = [], []
    for m, n, k, pass_us, smem_us in rows:
        use_pass, _ = fit.takes_pass(shapes, us, transpose, int(m), int(n), int(k), host)
        taken, best = float(pass_us if use_pass else smem_us), min(float(pass_us), float(smem_us))
        losses.append(taken / best)
        if taken > best:
            slower.append(f"{m}x{n}x{k} {taken / best:.3f}")
    geomean = math.exp(sum(map(math.log, losses)) / len(losses))
    assert geomean <= 1.003, f"the model's MN-major path: {geomean:.4f}x the faster one's time"
    assert len(slower) <= 1 and max(losses) <= 1.07, f"the model takes the slower MN-major path on {slower}"


def test_strict_swap_choice_is_the_faster_side():
    # Per shape of the strict sweep that timed both operand roles: the time of each role's pick (its own cost
    # model, looked up in the sweep, widening pass included); the model must take the faster role.
    sweep = LOGS / "fp8-gemm-sweep-strict-tail.json"
    plain_shapes, swap_shapes = (fit.parse_shapes(fit.DEFAULT_SHAPES[m]) for m in ("strict", "swap"))
    plain_us, swap_us = shapes_in_source("kF16AShapes")[1], shapes_in_source("kF16ASwapShapes")[1]
    split = fit.SPLIT["strict"]
    swapped = {(r["N"], r["M"], r["K"]): r for r in fit.load_records(sweep, "swap")}
    recs = fit.load_records(sweep, "strict")
    assert len(recs) == len(swapped) == 30
    wrong, swaps = [], 0
    for r in recs:
        m, n, k = r["M"], r["N"], r["K"]
        plain_t, _ = fit.pick_time(r, plain_shapes, plain_us, split)
        swap_t, _ = fit.pick_time(swapped[(m, n, k)], swap_shapes, swap_us, split)
        takes = fit.takes_swap(plain_shapes, plain_us, m, n, k)
        swaps += takes
        if takes != (swap_t < plain_t):
            wrong.append(f"{m}x{n}x{k} (swapped / unswapped {swap_t / plain_t:.3f})")
    assert swaps > 0, "the model never swaps"
    assert not wrong, f"the model takes the slower operand roles on {wrong}"


def test_strict_mn_major_route_beats_copying_a():
    # The H100 sweep of strict mode's three MN-major routes (a copied for kF16A, the roles swapped, a read
    # as it lies): the pick within 2 % of the swept best on the 30 shapes, at most 14 % on one, and on the 18
    # challenge shapes at least 4 % faster than the same model without the as-it-lies route.
    recs = fit.load_records(LOGS / "fp8-gemm-sweep-strict-mn-h100-e8e22b4.json", "strict-ar")
    assert len(recs) == 30
    shapes, split = fit.parse_shapes(fit.DEFAULT_SHAPES["strict-ar"]), fit.SPLIT["strict"]
    geomean, worst = fit.quality(recs, shapes, fit.STRICT_AR_US, split)
    assert geomean <= 1.02 and math.exp(worst) <= 1.14, f"pick / swept best {geomean:.4f}, worst {worst:.3f}"
    challenge = [r for r in recs if r["M"] in (1024, 6144)]
    assert len(challenge) == 18

    def picked_us(us):
        times = [fit.pick_time(r, *fit.timed(r, shapes, us), split)[0] for r in challenge]
        return math.exp(sum(map(math.log, times)) / len(times))

    routes = {fit.strict_mn_route(shapes, fit.STRICT_AR_US, split, r["M"], r["N"], r["K"])[0] for r in recs}
    assert routes == {"ar", "swap", "plain"}, routes
    without = picked_us([1e9] * len(shapes))  # a route no shape takes
    assert picked_us(fit.STRICT_AR_US) <= 0.96 * without


def test_strict_swap_choice_on_mn_major_operands_is_the_faster_side():
    # Same-process A/B on the MN-major layout: A = a build that never swapped these shapes, B = one that
    # swapped the five 1024-row ones as K-major prices them (b then copied by the transpose pass as well).
    shapes = fit.parse_shapes(fit.DEFAULT_SHAPES["strict"])
    us = shapes_in_source("kF16AShapes")[1]
    recs = json.loads((LOGS / "fp8-gemm-ab-strict-swap-mn-82c6e0c.json").read_text())["records"]
    both = [r for r in recs if fit.takes_swap(shapes, us, r["M"], r["N"], r["K"])]
    assert len(both) == 5, "the five 1024-row shapes K-major swaps"
    wrong = []
    for r in both:
        if fit.takes_swap(shapes, us, r["M"], r["N"], r["K"], mn=True) != (r["b_us"] < r["a_us"]):
            wrong.append(f"{r['M']}x{r['N']}x{r['K']}")
    assert not wrong, f"the model takes the slower operand roles on MN-major {wrong}"


def test_the_96_wide_tile_is_picked_only_where_it_needs_no_more_waves():
    # Its constant is a decision boundary fitted to 30 shapes; per block it measured 0.88x the 128-wide tile's
    # time (logs/fp8-gemm-tile-slopes-cdf55ab.log), so needing more waves than the 128-wide tile is a loss the
    # model must not buy. Checked over a grid of plausible shapes.
    shapes = fit.parse_shapes(fit.FAST_SHAPES)
    us, split = shapes_in_source("kFp8Shapes")[1], fit.SPLIT["fast"]
    picked, wrong = 0, []
    for m in (64, 128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192):
        for n in (512, 576, 1024, 1536, 2048, 2112, 3072, 4096, 4608, 6144, 7168, 8192, 24576):
            for k in (512, 1536, 2048, 4096, 7168, 16384):
                i, splits, _ = fit.choose(shapes, us, m, n, k, split)
                if (shapes[i]["nc"], shapes[i]["bn"]) != (2, 96):
                    continue
                picked += 1
                blocks_m = fit.cdiv(m, 128)
                waves_96 = fit.cdiv(blocks_m * fit.cdiv(n, 96) * splits, fit.SMS)
                waves_128 = fit.cdiv(blocks_m * fit.cdiv(n, 128) * splits, fit.SMS)
                if waves_96 > waves_128:
                    wrong.append(f"{m}x{n}x{k} ({waves_96} waves against {waves_128})")
    assert picked > 0, "the 128x96 tile is never picked on the grid"
    assert not wrong, f"the 128x96 tile is picked where it needs more waves: {wrong}"
