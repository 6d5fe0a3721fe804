"""`kforge build --backend cuda` of fp8-gemm, checked without a GPU (as tests/rocm does for gfx942).

The cu130 variant is built with the pinned nvcc, then: every sm_90a GEMM kernel in the .so uses the tensor
cores (QGMMA / HGMMA in its SASS, read with the cuobjdump that triton ships), and bench/fp8_gemm_ptxas.sh
finds no serialized wgmma (ptxas reports those only in `info` lines: C7514 and kin, a 1.3-2x slowdown that
nothing else shows) and no spills beyond the few bytes the kernels are known for. Runs are on the H200 only
(bench/).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from support.kforge_hub import REPO_ROOT, kforge_bin
from support.process import run

VARIANT = "torch211-cxx11-cu130-x86_64-linux"
# Spill bytes ptxas reports for the sm_90a kernels (bench/fp8_gemm_ptxas.sh; the most is 36 bytes of one
# strict kernel): more means a change pushed a kernel past its register budget.
MAX_SPILL_BYTES = 64


def cuobjdump() -> Path:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    assert path.is_file(), f"{path}: triton (a dependency of the torch wheel) ships cuobjdump; reinstall it"
    return path


@pytest.fixture(scope="module")
def fp8_gemm_so(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cuda-build")
    jobs = str(os.cpu_count() or 2)
    run([str(kforge_bin()), "build", str(REPO_ROOT / "kernels/fp8-gemm"), "--backend", "cuda", "-j", jobs,
         "--out", str(out)])  # fmt: skip
    libs = sorted((out / VARIANT).glob("*.so"))
    assert len(libs) == 1, f"expected one .so in {out / VARIANT}: {libs}"
    return libs[0]


def sass_functions(so: Path, arch: str) -> dict[str, str]:
    """{function name: its SASS} of the cubin for `arch` in the .so's fatbin."""
    listing = run([str(cuobjdump()), "--dump-sass", str(so)])
    functions: dict[str, str] = {}
    for section in re.split(r"\narch = ", listing)[1:]:  # ("code for" says sm_90 for sm_90a)
        if not section.startswith(arch + "\n"):
            continue
        for block in re.split(r"\n\s*Function : ", section)[1:]:
            name, _, body = block.partition("\n")
            functions[name.strip()] = body
    assert functions, f"no {arch} code in {so}"
    return functions


def test_every_sm90a_gemm_kernel_uses_the_tensor_cores(fp8_gemm_so):
    functions = sass_functions(fp8_gemm_so, "sm_90a")
    gemms = {name: body for name, body in functions.items() if "sm9011gemm_kernel" in name}
    assert len(gemms) >= 20, f"expected the sm_90a GEMM instantiations, found {sorted(gemms)}"
    for name, body in gemms.items():
        # Elem 0/1/6/7 (e4m3, fast) run QGMMA; 2-5 (bf16/f16, strict) HGMMA.
        elem = int(re.search(r"ElemE(\d)", name).group(1))
        opcode = "QGMMA" if elem in (0, 1, 6, 7) else "HGMMA"
        assert opcode in body, f"{name}: no {opcode} in its SASS"


def test_ptxas_serializes_no_wgmma_and_spills_little(fp8_gemm_so):
    # The build fetched the pinned nvcc into the kforge cache, where the script finds it.
    script = REPO_ROOT / "bench/fp8_gemm_ptxas.sh"
    report = run(["bash", str(script)], env=dict(os.environ, PYTHON=sys.executable))
    serialized = [line for line in report.splitlines() if re.search(r"\(C75\d\d\)", line)]
    assert not serialized, "ptxas serialized wgmma:\n" + "\n".join(serialized)
    kernels = [line for line in report.splitlines() if line.startswith("sm90 gemm")]
    assert len(kernels) >= 20, f"no per-kernel lines in the ptxas report:\n{report[-3000:]}"
    for line in kernels:
        spilled = int(re.search(r"(\d+) bytes spill stores", line).group(1))
        assert spilled <= MAX_SPILL_BYTES, line
