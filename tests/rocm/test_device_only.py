"""`kforge build --backend rocm --device-only` for gfx942: fp8-gemm and relu device code, checked here.

The code objects kforge writes are inspected with LLVM's own tools (llvm-readelf notes, llvm-objdump), not
with kforge's report, so the two must agree. Compiled and disassembled only: no AMD GPU runs this code.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from support.process import run

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("clang++-19", "llvm-objdump-19", "llvm-readelf-19")
# gfx942 per-wave limits: 512 unified VGPRs (arch + AGPR) per lane, 102 addressable SGPRs plus up to 6
# reserved (VCC, FLAT_SCRATCH, XNACK_MASK) as .sgpr_count counts them, 64 KiB LDS per workgroup.
MAX_VGPRS, MAX_SGPRS, MAX_LDS = 512, 108, 64 * 1024
EM_AMDGPU = 224


def kforge_bin() -> str:
    path = os.environ.get("KFORGE_BIN") or str(ROOT / "target" / "debug" / "kforge")
    assert Path(path).is_file(), f"{path}: build the kforge binary first (cargo build)"
    return path


@pytest.fixture(scope="module", autouse=True)
def rocm_tools():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        message = f"missing {', '.join(missing)}: run scripts/install-rocm-tools.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def kernel_metadata(code_object: Path) -> dict[str, dict[str, int]]:
    """Per-kernel integer fields of the AMDGPU metadata note, as llvm-readelf prints it."""
    notes = run(["llvm-readelf-19", "--notes", str(code_object)])
    kernels: dict[str, dict[str, int]] = {}
    for block in re.split(r"\n  - \.", notes)[1:]:
        fields = dict(re.findall(r"\.?(\w+):\s+(\d+)\s*$", "." + block, re.M))
        name = re.search(r"^\s*\.?name:\s+(\S+)", "." + block, re.M)
        if name and "vgpr_count" in fields:
            kernels[name.group(1)] = {k: int(v) for k, v in fields.items()}
    assert kernels, f"no kernel metadata in {code_object}:\n{notes[:2000]}"
    return kernels


def mfma_by_kernel(code_object: Path) -> dict[str, list[str]]:
    listing = run(["llvm-objdump-19", "-d", "--mcpu=gfx942", str(code_object)])
    out: dict[str, list[str]] = {}
    current = None
    for line in listing.splitlines():
        header = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if header:
            current = header.group(1)
            out[current] = []
        elif current and (m := re.match(r"\s+(v_mfma\w*)", line)):
            out[current].append(m.group(1))
    return out


def device_build(project: Path) -> tuple[str, Path]:
    output = run([kforge_bin(), "build", str(project), "--backend", "rocm", "--device-only"])
    return output, project / "build" / "device" / "rocm" / "gfx942"


def assert_within_limits(name: str, meta: dict[str, int]) -> None:
    assert meta["vgpr_count"] <= MAX_VGPRS, f"{name}: {meta}"
    assert meta["sgpr_count"] <= MAX_SGPRS, f"{name}: {meta}"
    assert meta["group_segment_fixed_size"] <= MAX_LDS, f"{name}: {meta}"
    assert meta["private_segment_fixed_size"] == 0, f"{name} uses scratch: {meta}"
    assert meta["vgpr_spill_count"] == 0 and meta["sgpr_spill_count"] == 0, f"{name} spills: {meta}"


def copy_project(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return dst


def test_fp8_gemm_mfma_kernel_for_gfx942(tmp_path: Path, rocm_report):
    project = copy_project(ROOT / "kernels" / "fp8-gemm", tmp_path / "fp8-gemm")
    output, out = device_build(project)
    rocm_report(output)
    code_object = out / "gemm_rocm.co"
    head = code_object.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == EM_AMDGPU

    meta = kernel_metadata(code_object)
    gemm = meta["fp8_gemm_blockscaled_gfx942"]
    assert_within_limits("fp8_gemm_blockscaled_gfx942", gemm)
    # Two unpadded, swizzled 128x128 FP8 tiles; 256 VGPRs or fewer keeps two waves per SIMD.
    assert gemm["group_segment_fixed_size"] == 2 * 128 * 128
    assert gemm["vgpr_count"] <= 256
    assert gemm["max_flat_workgroup_size"] == 256

    mfma = mfma_by_kernel(code_object)["fp8_gemm_blockscaled_gfx942"]
    # 128-K block / 16 K per MFMA = 8 steps, times 2x2 MFMA tiles per wave, fully unrolled.
    assert mfma == ["v_mfma_f32_32x32x16_fp8_fp8"] * 32

    # Software pipelining: the next K tile's 8 global loads are issued before this tile's 32 MFMAs, and
    # nothing waits on them (vmcnt) until all 32 have been issued.
    listing = run(["llvm-objdump-19", "-d", "--mcpu=gfx942", str(code_object)]).splitlines()
    mfma_at = [i for i, line in enumerate(listing) if "v_mfma_f32_32x32x16_fp8_fp8" in line]
    loads_before = [i for i, line in enumerate(listing[: mfma_at[0]]) if "global_load_dwordx4" in line]
    assert len(loads_before) >= 16, "expected the prologue's and the prefetch's tile loads before the MFMAs"
    assert not any("vmcnt" in line for line in listing[loads_before[-1] : mfma_at[31]])

    # kforge's own report says the same and never claims a run.
    assert "compiled and disassembled only, never executed" in output
    assert "v_mfma_f32_32x32x16_fp8_fp8 x32" in output
    assert f"VGPR {gemm['vgpr_count']}/512" in output
    assert f"LDS {gemm['group_segment_fixed_size']}/65536 B" in output


def test_relu_for_gfx942(tmp_path: Path, rocm_report):
    project = copy_project(ROOT / "kernels" / "relu", tmp_path / "relu")
    output, out = device_build(project)
    rocm_report(output)
    meta = kernel_metadata(out / "relu_rocm.co")
    assert sorted(meta) == ["relu_bf16", "relu_f16", "relu_f32", "relu_f64"]
    for name, fields in meta.items():
        assert_within_limits(name, fields)
        assert fields["max_flat_workgroup_size"] == 256
        assert fields["group_segment_fixed_size"] == 0
    assert not any(mfma_by_kernel(out / "relu_rocm.co").values())
    assert "relu_rocm gfx942 ->" in output
