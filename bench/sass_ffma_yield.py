"""Experiment: let the promotion FFMAs of the sm_90a kernels yield, patched into a built .so.

    python bench/sass_ffma_yield.py IN.so OUT.so [--fraction 0.5625] [--kernels REGEX]

After each 128-K block a consumer warp issues a run of FFMAs (`res += acc * scale`). ptxas marks every
other one as reusing the scale register from the operand cache, and such an instruction must not yield the
issue slot (the cache would be lost), so the run holds the scheduler while the other consumer's warp on the
same sub-partition waits to issue its wgmma. DeepGEMM reported 10 %+ on fine-grained-scaled FP8 GEMMs from
clearing, in the first part of each run, the reuse flag and the matching "no yield" bit. Both are scheduling
hints in the 23 control bits of each 128-bit Hopper instruction (bits 41-63 of its high word: stall 0-3,
yield 4, barriers 5-16, reuse 17-20), so the results cannot change, only the issue order.

The SASS comes from the cuobjdump that triton ships; the .so's fatbin must be uncompressed (nvcc's default)
so that each run's bytes can be found and rewritten in place, same length. Prints what it changed per kernel.
"""

import argparse
import re
import struct
import subprocess
import sys
from pathlib import Path

YIELD_BIT = 1 << 45  # control bit 4: set = the warp keeps the issue slot
REUSE_B_BIT = 1 << 59  # control bit 18: operand b read from the reuse cache
REUSE_MASK = 0xF << 58
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\* (0x[0-9a-f]{16}) \*/")
HIGH_WORD = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")


def cuobjdump() -> Path:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not path.is_file():
        raise SystemExit(f"{path}: not found (triton ships cuobjdump; reinstall it)")
    return path


def functions(so: Path):
    """{mangled name: [(address, text, low, high)]} of the sm_90 cubin, longest body per name."""
    listing = subprocess.run(
        [str(cuobjdump()), "--dump-sass", str(so)], check=True, capture_output=True, text=True
    ).stdout
    bodies = {}
    for part in re.split(r"\n\s*Function : ", listing)[1:]:
        name, _, body = part.partition("\n")
        lines = body.splitlines()
        code = []
        for i, line in enumerate(lines[:-1]):
            match = INSTRUCTION.search(line)
            high = HIGH_WORD.match(lines[i + 1])
            if match and high:
                code.append((int(match[1], 16), match[2], int(match[3], 16), int(high[1], 16)))
        if len(code) > len(bodies.get(name.strip(), [])):
            bodies[name.strip()] = code
    return bodies


def ffma_runs(code, max_gap=4, min_len=16):
    """Index ranges [first, last] of runs of >= min_len FFMAs, at most max_gap other instructions apart."""
    runs, start, last, count = [], None, None, 0
    for i, (_, text, _, _) in enumerate(code):
        if not text.split()[0].startswith("FFMA") and not (text.startswith("@") and "FFMA" in text):
            if last is not None and i - last > max_gap:
                if count >= min_len:
                    runs.append((start, last))
                start, last, count = None, None, 0
            continue
        if start is None:
            start = i
        last, count = i, count + 1
    if count >= min_len:
        runs.append((start, last))
    return runs


def patched_run(code, first, last, fraction):
    """(original bytes, patched bytes, instructions changed) of code[first..last]."""
    ffmas = [i for i in range(first, last + 1) if "FFMA" in code[i][1]]
    limit = ffmas[int(len(ffmas) * fraction) - 1] if int(len(ffmas) * fraction) else first - 1
    old, new, changed = b"", b"", 0
    for i in range(first, last + 1):
        address, text, low, high = code[i]
        if i > first and address != code[i - 1][0] + 16:
            raise SystemExit(f"instructions not contiguous at {address:#x}")
        old += struct.pack("<QQ", low, high)
        if i <= limit and "FFMA" in text and high & REUSE_MASK == REUSE_B_BIT and high & YIELD_BIT:
            high &= ~(REUSE_B_BIT | YIELD_BIT)
            changed += 1
        new += struct.pack("<QQ", low, high)
    return old, new, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--fraction", type=float, default=9 / 16, help="share of each run's FFMAs patched")
    parser.add_argument("--kernels", default=r"fp8gemm4sm90\d+gemm_kernel", help="regex on mangled names")
    args = parser.parse_args()
    image = bytearray(args.input.read_bytes())
    total = 0
    for name, code in sorted(functions(args.input).items()):
        if not re.search(args.kernels, name):
            continue
        changed_here, runs = 0, ffma_runs(code)
        for first, last in runs:
            old, new, changed = patched_run(code, first, last, args.fraction)
            if not changed:
                continue
            hits = [m.start() for m in re.finditer(re.escape(old), image)]
            if not hits and image.find(new) >= 0:
                continue  # the same code in another instantiation, already patched
            if not hits:
                where = f"{name}: run at {code[first][0]:#x}"
                raise SystemExit(f"{where} not found in {args.input} (compressed fatbin?)")
            for offset in hits:
                image[offset : offset + len(old)] = new
            changed_here += changed
        if changed_here:
            demangled = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
            print(f"{changed_here:5d} FFMAs in {len(runs)} runs: {demangled.split('(CUtensorMap')[0]}")
        total += changed_here
    if not total:
        sys.exit("no FFMA changed")
    args.output.write_bytes(image)
    print(f"{total} FFMAs changed -> {args.output}")


if __name__ == "__main__":
    main()
