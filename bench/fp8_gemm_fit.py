"""Fits the sm_90a cost model (kFp8Shapes / kF16AShapes / kBf16Shapes in
kernels/fp8-gemm/gemm_cuda/gemm_cuda.cu) to one or more --sweep runs.

    python bench/fp8_gemm_fit.py RESULTS.json [MORE.json ...] [--mode fast|strict|bf16|swap|mn|ar|strict-ar]
                                 [--shapes "..."] [--hold]

The model, as in gemm_cuda.cu's choose(): per candidate tile configuration and K split, waves x (128-K blocks
per unit x the configuration's µs per block + 0.5 µs per unit, more when split), at least the DRAM time,
plus the split partials' traffic; candidates within 3 % keep the earlier one. This script fits each
configuration's µs per block and the two split-K constants so that the model's pick is as fast as possible on
the swept shapes (coordinate search on the geomean of pick / swept best; several sweeps are fitted together,
each judging only the candidates it timed), and prints the constants and each sweep's per-shape picks.
--mode swap fits kF16ASwapShapes on the strict sweep's "swap:CONFIG" entries (the roles swapped: each record
becomes the N x M problem). --mode mn fits kFp8MNShapes (MN-major operands transposed in shared memory) on the
MN-major sweep, against the alternative gemm_cuda.cu weighs: the transpose pass (2 (M + N) K bytes at a fitted
rate plus a fixed µs) and the K-major kernels' pick (their constants, FAST_US, fixed); split-K's stay.
--mode ar fits kFp8ARShapes (A read in place into registers, B through a pass) on a --sweep mn-paths run,
weighed as gemm_cuda.cu does against the pass route and the shared-memory one (their constants fixed).
--mode strict-ar fits kF16ARShapes (strict mode's a read as it lies) on a --sweep strict-mn run, weighed
against both kF16A roles with their copies of the e4m3 operand (their constants fixed).
--hold (fast) fits only the tiles that --shapes appends to FAST_SHAPES, the others' constants kept: a tile
joins without moving the picks that earlier sweeps (which never timed it) judged.
"""

import argparse
import functools
import json
import math
import random

SMS = 132


def cdiv(x, y):
    return (x + y - 1) // y


def parse_shapes(text):
    """Candidates from "nc,waves,bn,cluster,cluster_n[,max_kb_per_split];..." (Shape's fields but its µs)."""
    out = []
    for item in text.split(";"):
        nc, waves, bn, cluster, cluster_n, *limit = (int(v) for v in item.split(","))
        out.append(dict(nc=nc, waves=waves, bn=bn, cluster=cluster, cluster_n=cluster_n, max_kb=sum(limit)))
    return out


def config_key(s, splits):
    cl = "1" if s["cluster"] == 1 else ("n2" if s["cluster_n"] else "m2")
    return f"{s['nc']},{s['bn']},{splits},{cl},{s['waves']}"


# Split-K (fixed µs per unit, partials' bytes per µs) as gemm_cuda.cu has them (kFp8Split; kBf16Split for
# both strict paths): the first starting point of the fit.
SPLIT = {"fast": (5.6, 3.0e6), "strict": (4.1, 3.0e6), "bf16": (4.1, 3.0e6), "swap": (4.1, 3.0e6)}
# kFp8Shapes' µs per block (--mode mn prices the K-major kernels after the transpose pass with them) and
# transpose_pass_us()'s GPU constants (bytes per µs, fixed µs), the mn fit's starting point (kernel-only
# times: gemm_cuda.cu adds kPassHostUs, the pass's host cost, on top).
FAST_SHAPES = ";".join(
    ["2,1,192,1,0", "2,1,128,1,0", "2,1,64,1,0", "1,1,128,1,0", "2,2,128,1,0", "2,1,192,2,0", "3,1,128,1,0"]
    + ["2,1,96,1,0", "1,1,64,1,0", "1,1,96,1,0"]
)
FAST_US = [1.15, 0.84, 0.35, 0.36, 0.99, 0.76, 0.79, 0.60, 0.24, 0.30]
TRANSPOSE = (5.0e6, 2.1)
# Each mode's candidates, in gemm_cuda.cu's order (kFp8Shapes, kF16AShapes, kFp8MNShapes). Strict sweeps
# before c822649 timed the bf16 path (kBf16Shapes: the first three tiles); from c822649 on the default strict
# path is A widened in registers (kF16AShapes, with the three-consumer tile at most 56 blocks per split).
DEFAULT_SHAPES = {
    "fast": FAST_SHAPES,
    "strict": "2,1,128,1,0;2,1,64,1,0;1,1,128,1,0;3,1,128,1,0,56;2,1,96,1,0",
    "bf16": "2,1,128,1,0;2,1,64,1,0;1,1,128,1,0",
    "swap": "2,1,128,1,0;2,1,64,1,0;1,1,128,1,0",
    "mn": "2,1,128,1,0;2,1,64,1,0;1,1,128,1,0",
    "ar": "2,1,192,1,0;2,1,128,1,0;2,1,64,1,0;2,1,96,1,0",
}
# Strict mode's a read as it lies (kF16ARShapes) compiles kF16A's tiles.
DEFAULT_SHAPES["strict-ar"] = DEFAULT_SHAPES["strict"]
# kFp8MNShapes' µs per block: --mode ar weighs the shared-memory route with them, fixed.
MN_US = [0.81, 0.52, 0.61]
MN_SHAPES = parse_shapes(DEFAULT_SHAPES["mn"])
# --sweep mn-paths' keys of kE4M3AR's configurations (A in registers as it lies, B through a pass).
AR_PREFIX = "ar:"


def tail_splits(units, slots, kb):
    """gemm_cuda.cu's tail_splits(): K splits (2-4) for the tiles of a partial last wave, or 1."""
    rem = units % slots
    if units < 2 * slots or rem == 0:
        return 1
    best, best_time = 1, 1.0
    for s in range(2, 5):
        if kb < 2 * s:
            break
        time = cdiv(rem * s, slots) / s
        if time < best_time - 1e-9:
            best, best_time = s, time
    return best


def choose(shapes, us, m, n, k, split, elem_bytes=1, strict_model=False):
    """gemm_cuda.cu's choose(): (shape index, splits, cost) of the cheapest candidate; split as in SPLIT. With
    `strict_model` an unsplit candidate's partial last wave may be split (splits "t") and ties at the DRAM
    floor go to the lower own time."""
    kb = cdiv(k, 128)
    mem = m * n * 2 / 3.0e6 + (m + n) * k * elem_bytes / 3.0e6
    best, best_cost, best_own = None, math.inf, math.inf

    def better(own, cost):  # within 3 % the earlier wins (strict: unless both sit at the DRAM floor)
        floor_tie = strict_model and cost == mem and best_cost == mem
        return cost < best_cost * 0.97 or (floor_tie and own < best_own * 0.97)

    for i, s in enumerate(shapes):
        bm = cdiv(m, 64 * s["nc"] * s["waves"])
        bn = cdiv(n, s["bn"])
        if s["cluster_n"]:
            bn = cdiv(bn, s["cluster"]) * s["cluster"]
        else:
            bm = cdiv(bm, s["cluster"]) * s["cluster"]
        tiles = bm * bn
        for splits in range(1, 9):
            per = cdiv(kb, splits)
            if splits > 1 and per < 4:
                break
            if s["max_kb"] and per > s["max_kb"]:
                continue
            waves = cdiv(tiles * splits, SMS)
            unit_us = per * us[i] + (split[0] if splits > 1 else 0.5)
            own = waves * unit_us
            cost = max(own, mem)
            if splits > 1:
                cost += splits * m * n * 8 / split[1]
            if better(own, cost):
                best_cost, best_own, best = cost, own, (i, splits, cost)
            ts = tail_splits(tiles, SMS, kb) if strict_model and splits == 1 and s["cluster"] == 1 else 1
            if ts > 1:
                rem = tiles % SMS
                full_waves = tiles // SMS * unit_us  # unsplit units (per == kb)
                split_rounds = cdiv(rem * ts, SMS) * (cdiv(kb, ts) * us[i] + split[0])
                own = full_waves + split_rounds + ts * m * n * 8 / split[1] * rem / tiles
                cost = max(own, mem)
                if better(own, cost):
                    best_cost, best_own, best = cost, own, (i, "t", cost)
    return best


# Strict mode's swapped roles (C^T = B A^T) as gemm_cuda.cu weighs them: kF16ASwapShapes (its tiles in
# DEFAULT_SHAPES["swap"], SWAP_US) priced on the swapped problem, plus the widening pass (WIDEN: bytes per µs,
# fixed µs) of the operand each side widens.
SWAP_US = [1.26, 0.75, 0.71]
# kF16AShapes' µs per block: --mode strict-ar weighs both roles of kF16A with them (and SWAP_US), fixed.
STRICT_US = [1.11, 0.71, 0.67, 1.56, 0.90]
# kF16ARShapes' µs per block (--mode strict-ar's fit of logs/fp8-gemm-sweep-strict-mn-h100-e8e22b4.json).
STRICT_AR_US = [1.07, 0.67, 0.71, 1.55, 0.83]
STRICT_SHAPES, SWAP_SHAPES = parse_shapes(DEFAULT_SHAPES["strict"]), parse_shapes(DEFAULT_SHAPES["swap"])
WIDEN = (3.5e6, 2.0)


def widen_pass_us(rows, k):
    return 3.0 * rows * k / WIDEN[0] + WIDEN[1]


def copy_pass_us(rows, k):
    return 2.0 * rows * k / WIDEN[0]


def strict_roles(shapes, us, m, n, k, split=SPLIT["strict"], mn=False):
    """gemm_cuda.cu's strict picks of both roles with their end-to-end costs: ((plain pick, cost), (swapped
    pick, cost)); `shapes` / `us` are kF16AShapes'. `mn`: MN-major operands, whose e4m3 one each role copies
    (transposed) too."""
    plain = choose(shapes, us, m, n, k, split, 2, strict_model=True)
    swapped = choose(SWAP_SHAPES, SWAP_US, n, m, k, split, 2, strict_model=True)
    copy_a, copy_b = (copy_pass_us(m, k), copy_pass_us(n, k)) if mn else (0.0, 0.0)
    return (
        (plain, plain[2] + widen_pass_us(n, k) + copy_a),
        (swapped, swapped[2] + widen_pass_us(m, k) + copy_b),
    )


def takes_swap(shapes, us, m, n, k, split=SPLIT["strict"], mn=False):
    """gemm_cuda.cu's strict choice of swapped roles (see strict_roles)."""
    (_, plain_us), (_, swap_us) = strict_roles(shapes, us, m, n, k, split, mn)
    return swap_us < plain_us


def strict_mn_route(ar_shapes, ar_us, split, m, n, k):
    """gemm_cuda.cu's strict choice on MN-major e4m3fn operands (K % 16 == 0): ("plain" | "swap" | "ar",
    its pick); `ar_shapes` / `ar_us` are kF16ARShapes', the roles' constants fixed."""
    plain, swapped = strict_roles(STRICT_SHAPES, STRICT_US, m, n, k, split, mn=True)
    (route, (pick, cost)) = ("swap", swapped) if swapped[1] < plain[1] else ("plain", plain)
    ar = choose(ar_shapes, ar_us, m, n, k, split, 2, strict_model=True)
    return ("ar", ar) if ar[2] + widen_pass_us(n, k) < cost else (route, pick)


@functools.cache
def kmajor_cost(m, n, k):
    """The K-major kernels' pick's cost (fixed constants: the same for every trial of the mn fit)."""
    return choose(parse_shapes(FAST_SHAPES), FAST_US, m, n, k, SPLIT["fast"])[2]


def pass_us(transpose, rows, k):
    """gemm_cuda.cu's transpose_pass_us() on the GPU (no host): `rows` x K e4m3 bytes read and written."""
    return 2 * rows * k / transpose[0] + transpose[1]


def takes_pass(shapes, us, transpose, m, n, k, host_us=0.0):
    """gemm_cuda.cu's MN-major choice: (pass or not, the shared-memory pick: shape index, splits, cost)."""
    pick = choose(shapes, us, m, n, k, SPLIT["fast"])
    return kmajor_cost(m, n, k) + pass_us(transpose, m + n, k) + host_us <= pick[2], pick


def mn_route(ar_shapes, ar_us, transpose, m, n, k):
    """gemm_cuda.cu's MN-major choice among its three routes (both operands MN-major, K % 16 == 0): "pass",
    ("ar", kE4M3AR's pick) or ("smem", kFp8MNShapes' pick); kernel-only costs (no host)."""
    route, cost = ("pass", None), kmajor_cost(m, n, k) + pass_us(transpose, m + n, k)
    if k % 16 == 0:
        ar = choose(ar_shapes, ar_us, m, n, k, SPLIT["fast"])
        ar_cost = ar[2] + pass_us(transpose, n, k)
        if ar_cost < cost:
            route, cost = ("ar", ar), ar_cost
    smem = choose(MN_SHAPES, MN_US, m, n, k, SPLIT["fast"])
    return ("smem", smem) if smem[2] < cost else route


def swept_split(sweep, key_of, splits):
    """(µs, key) of the timed configuration nearest `splits` ("t" where timed, else as unsplit)."""
    if splits == "t":  # a sweep that did not time the split last wave judges it as unsplit
        if key_of("t") in sweep:
            return sweep[key_of("t")]["us"], key_of("t")
        splits = 1
    # Splits the sweep did not time count as their nearest timed split count.
    for s in sorted({1, 2, 4}, key=lambda t: abs(t - splits)):
        if key_of(s) in sweep:
            return sweep[key_of(s)]["us"], key_of(s)
    return math.inf, key_of(splits)


def pick_time(rec, shapes, us, split):
    """The swept time of the model's pick; in mn mode `split` holds TRANSPOSE's two constants; in ar mode
    `shapes` / `us` are kFp8ARShapes' and `split` is TRANSPOSE; in strict-ar mode kF16ARShapes'."""
    m, n, k, sweep = rec["M"], rec["N"], rec["K"], rec["sweep"]
    if rec.get("routes") == "strict":
        route, (i, splits, _) = strict_mn_route(shapes, us, split, m, n, k)
        tiles, prefix = {
            "plain": (STRICT_SHAPES, ""),
            "swap": (SWAP_SHAPES, SWAPPED),
            "ar": (shapes, AR_PREFIX),
        }[route]
        return swept_split(sweep, lambda s: prefix + config_key(tiles[i], s), splits)
    if rec.get("routes"):
        route, pick = mn_route(shapes, us, split, m, n, k)
        if route == "pass":
            return sweep.get("pass", {"us": math.inf})["us"], "pass"
        (i, splits, _), (tiles, prefix) = pick, (shapes, AR_PREFIX) if route == "ar" else (MN_SHAPES, "")
        return swept_split(sweep, lambda s: prefix + config_key(tiles[i], s), splits)
    if rec["layout"] == "mn-major":
        use_pass, (i, splits, _) = takes_pass(shapes, us, split, m, n, k)
        if use_pass:
            return sweep["pass"]["us"], "pass"
    else:
        strict = rec["mode"] == "strict"  # strict mode's kernels read 16-bit B; its model weighs tail splits
        i, splits, _ = choose(shapes, us, m, n, k, split, 2 if strict else 1, strict_model=strict)
    return swept_split(sweep, lambda s: config_key(shapes[i], s), splits)


def fitted_key(rec, s, splits):
    """`rec`'s sweep key of the fitted table's configuration `s` (--mode ar: kE4M3AR's, "ar:CONFIG")."""
    return (AR_PREFIX if rec.get("routes") else "") + config_key(s, splits)


def timed(rec, shapes, us):
    """The candidates (and their µs) whose unsplit configuration `rec`'s sweep timed: a sweep cannot judge the
    others (a tile added after it ran), so the model is judged there without them."""
    keep = [i for i, s in enumerate(shapes) if fitted_key(rec, s, 1) in rec["sweep"]]
    return [shapes[i] for i in keep], [us[i] for i in keep]


def quality(recs, shapes, us, split):
    """(geomean, largest log) of pick / swept best over `recs`, which may come from several sweeps."""
    logs = []
    for r in recs:
        t, _ = pick_time(r, *timed(r, shapes, us), split)
        logs.append(math.log(t / r["best_us"]))
    return math.exp(sum(logs) / len(logs)), max(logs)


SWAPPED = "swap:"  # --sweep strict's keys of the swapped tiles


def swapped_entries(sweep):
    return {k[len(SWAPPED) :]: v for k, v in sweep.items() if k.startswith(SWAPPED)}


def load_records(path, mode):
    """The swept records of `mode` (fast, strict: K-major; mn: fast on MN-major; bf16: strict sweeps of the
    bf16 path; swap: strict's swapped entries, as the N x M problem; ar, strict-ar: --sweep mn-paths /
    strict-mn records, every route timed), each with its swept best."""
    swap, routes = mode == "swap", {"ar": True, "strict-ar": "strict"}.get(mode)
    layouts = {
        "mn": ("fast", "mn-major"),
        "ar": ("fast", "mn-major"),
        "strict-ar": ("strict", "mn-major"),
        "bf16": ("strict", "k-major"),
        "swap": ("strict", "k-major"),
    }
    mode, layout = layouts.get(mode, (mode, "k-major"))
    with open(path) as f:
        recs = json.load(f)["records"]
    recs = [r for r in recs if r.get("sweep") and r["mode"] == mode and r["layout"] == layout]
    if swap:
        as_swapped = [dict(r, M=r["N"], N=r["M"], sweep=swapped_entries(r["sweep"])) for r in recs]
        recs = [r for r in as_swapped if r["sweep"]]
    if routes:
        recs = [dict(r, routes=routes) for r in recs if any(key.startswith(AR_PREFIX) for key in r["sweep"])]
    for r in recs:
        swept = [
            (k, v)
            for k, v in r["sweep"].items()
            if (k.count(",") == 4 and (routes == "strict" or not k.startswith(SWAPPED))) or k == "pass"
            if routes or not k.startswith(AR_PREFIX)
        ]
        r["best_key"], best = min(swept, key=lambda kv: kv[1]["us"])
        r["best_us"] = best["us"]
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+", help="sweep results; several are fitted together")
    ap.add_argument("--shapes", help="candidates, in kFp8Shapes / kBf16Shapes order")
    ap.add_argument(
        "--mode", choices=["fast", "strict", "bf16", "swap", "mn", "ar", "strict-ar"], default="fast"
    )
    ap.add_argument("--hold", action="store_true", help="fast: fit only the tiles --shapes appends")
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes or DEFAULT_SHAPES[args.mode])
    by_file = {path: load_records(path, args.mode) for path in args.json}
    recs = [r for rs in by_file.values() for r in rs]
    # Start: each configuration's median µs per block over the shapes that fill at least two waves unsplit.
    us = []
    for s in shapes:
        est = []
        for r in recs:
            key = fitted_key(r, s, 1)
            if key not in r["sweep"]:
                continue
            bm = cdiv(r["M"], 64 * s["nc"] * s["waves"])
            bn = cdiv(r["N"], s["bn"])
            waves = cdiv(bm * bn, SMS)
            if waves >= 2:
                est.append((r["sweep"][key]["us"] / waves - 0.5) / cdiv(r["K"], 128))
        us.append(sorted(est)[len(est) // 2] if est else 1.0)

    # The split-K constants (fixed cost per split unit, partial traffic rate) are fitted with the rest, from a
    # few starting points (the search is local); constants are rounded as gemm_cuda.cu writes them.
    def score_of(ps):
        return quality(recs, shapes, ps[:-2], ps[-2:])

    held = 0
    if args.hold:
        held = len(FAST_US)
        if args.mode != "fast" or shapes[:held] != parse_shapes(FAST_SHAPES):
            ap.error("--hold: --mode fast, with --shapes starting with FAST_SHAPES' candidates")
        us[:held] = FAST_US

    # ar: the transpose pass's constants are mn's, strict-ar: the split's are strict's, not refitted
    fixed_tail = held or args.mode in ("ar", "strict-ar")

    def search(params):
        score = score_of(params)
        for _ in range(5):
            for i in range(held, len(params) - (2 if fixed_tail else 0)):
                for f in [0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 1.03, 1.05, 1.1, 1.15, 1.2, 1.4, 2.0]:
                    trial = params[:i] + [params[i] * f] + params[i + 1 :]
                    q = score_of(trial)
                    if q < score:
                        score, params = q, trial
        rounded = [round(u, 2) for u in params[:-2]] + [round(params[-2], 1), float(f"{params[-1]:.2g}")]
        return score_of(rounded), rounded

    mn_like = args.mode in ("mn", "ar")
    split_mode = "strict" if args.mode == "strict-ar" else args.mode
    starts = [TRANSPOSE, (2.5e6, 3.0)] if mn_like else [SPLIT[split_mode], (2.0, 3e6), (1.0, 6e6)]
    starts = starts[:1] if fixed_tail else starts
    score, params = min(search(us + list(split)) for split in starts)
    us, split = params[:-2], params[-2:]
    # Robustness: the same picks' quality with every constant off by up to 5 % (10 % for the split ones).
    rng = random.Random(1)

    def jitter(xs, by):
        return [x * rng.uniform(1 - by, 1 + by) for x in xs]

    perturbed = sorted(quality(recs, shapes, jitter(us, 0.05), jitter(split, 0.1))[0] for _ in range(200))
    print(f"geomean pick / swept best {score[0]:.4f}, worst {math.exp(score[1]):.3f}; perturbed: median "
          f"{perturbed[100]:.4f}, 90th percentile {perturbed[180]:.4f}")  # fmt: skip
    for s, u in zip(shapes, us, strict=True):
        limit = f", {s['max_kb']}" if s["max_kb"] else ""
        print(f"  {{{s['nc']}, {s['waves']}, {s['bn']}, {s['cluster']}, {s['cluster_n']}, {u:.2f}{limit}}}")
    if args.mode in ("mn", "ar"):
        print(f"  transpose pass: {split[0]:.3g} bytes/us, {split[1]:.2f} us fixed")
    else:
        print(f"  split-K: {split[0]:.2f} us per unit, partials at {split[1]:.3g} bytes/us")
    for path, rs in by_file.items():
        q = quality(rs, shapes, us, split)
        print(f"{path}: pick / swept best {q[0]:.4f}, worst {math.exp(q[1]):.3f}")
        for r in rs:
            t, key = pick_time(r, *timed(r, shapes, us), split)
            best = f"{r['best_key']} {r['best_us']:.1f} us"
            print(f"  {r['M']}x{r['N']}x{r['K']}: pick {key} {t:.1f} us, best {best}")


if __name__ == "__main__":
    main()
