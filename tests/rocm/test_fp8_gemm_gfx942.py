"""Compile the fp8-gemm ROCm kernel for gfx942 with clang-19; check its machine code (compiled, not run)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels" / "fp8-gemm" / "gemm_rocm" / "fp8_gemm_gfx942.hip"
KERNEL = "fp8_gemm_blockscaled_gfx942"
TOOLS = ("clang++-19", "clang-offload-bundler-19", "llvm-objdump-19")
# gfx942 limits: 512 unified VGPRs (arch + acc) per lane, 64 KiB LDS per workgroup, 112 SGPRs incl. VCC.
MAX_VGPRS, MAX_LDS, MAX_SGPRS = 512, 65536, 112


def _require_tools():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}: run scripts/install-rocm-tools.sh")


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    _require_tools()
    out = tmp_path_factory.mktemp("gfx942")
    bundle = out / "fp8_gemm.o"
    _run(
        [
            "clang++-19", "-x", "hip", "--offload-arch=gfx942", "-nogpuinc", "-nogpulib",
            "--cuda-device-only", "-O3", "-std=c++17", "-save-temps", "-c", str(SOURCE), "-o", str(bundle),
        ],
        out,
    )  # fmt: skip
    code_object = out / "fp8_gemm.gfx942.co"
    _run(
        [
            "clang-offload-bundler-19", "--unbundle", "--type=o", f"--input={bundle}",
            f"--output={code_object}", "--targets=hipv4-amdgcn-amd-amdhsa--gfx942",
        ],
        out,
    )  # fmt: skip
    asm = next(out.glob("*gfx942.s")).read_text()
    disasm = _run(["llvm-objdump-19", "-d", str(code_object)], out)
    return {"code_object": code_object, "asm": asm, "disasm": disasm}


def _metadata(asm: str, key: str) -> int:
    match = re.search(rf"^\s+\.{key}:\s+(\d+)", asm, re.M)
    assert match, f"code object metadata lacks .{key}"
    return int(match.group(1))


def test_code_object_is_amdgcn_gfx942(build):
    head = build["code_object"].read_bytes()[:64]
    assert head[:4] == b"\x7fELF"
    assert int.from_bytes(head[18:20], "little") == 224  # EM_AMDGPU
    assert "gfx942" in build["disasm"]


def test_mfma_fp8_instructions_present(build):
    mfma = re.findall(r"v_mfma_f32_(?:32x32x16|16x16x32)_fp8_fp8", build["disasm"])
    # 128-K tile / 16 K per MFMA = 8 steps, times 2x2 MFMA tiles per wave, fully unrolled.
    assert len(mfma) == 32, f"expected 32 FP8 MFMAs per K tile, found {len(mfma)}"


def test_kernel_symbol_exported(build):
    assert f"<{KERNEL}>:" in build["disasm"]
    assert re.search(rf"\.name:\s+{KERNEL}\b", build["asm"])


def test_resources_within_gfx942_limits(build):
    asm = build["asm"]
    vgprs = _metadata(asm, "vgpr_count")
    sgprs = _metadata(asm, "sgpr_count")
    lds = _metadata(asm, "group_segment_fixed_size")
    scratch = _metadata(asm, "private_segment_fixed_size")
    print(f"{KERNEL}: vgprs={vgprs} sgprs={sgprs} lds={lds} scratch={scratch}")
    assert 0 < vgprs <= MAX_VGPRS
    assert 0 < sgprs <= MAX_SGPRS
    # Two 128x(128+8) byte FP8 tiles.
    assert lds == 2 * 128 * 136 <= MAX_LDS
    assert scratch == 0, "kernel spills to scratch"
    assert _metadata(asm, "vgpr_spill_count") == 0
