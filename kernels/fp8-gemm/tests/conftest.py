"""`fp8_gemm`: the CPU variant built once per session with `kforge build`; `fp8_gemm_cuda`: a CUDA build."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def make_package(work: Path, ext_name: str):
    """Wraps an already loaded extension in the package layout `kforge build` emits and imports it."""
    import importlib

    pkg = work / "pkg" / "fp8_gemm"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text((ROOT / "torch-ext/fp8_gemm/__init__.py").read_text())
    (pkg / "_ops.py").write_text(
        "import torch\n"
        f"ops = torch.ops.{ext_name}\n\n"
        f"def add_op_namespace_prefix(op_name: str) -> str:\n    return f'{ext_name}::{{op_name}}'\n"
    )
    sys.path.insert(0, str(work / "pkg"))
    sys.modules.pop("fp8_gemm", None)
    sys.modules.pop("fp8_gemm._ops", None)
    module = importlib.import_module("fp8_gemm")
    sys.path.remove(str(work / "pkg"))
    return module


@pytest.fixture(scope="session")
def fp8_gemm(tmp_path_factory):
    """The CPU variant exactly as users get it: `kforge build --variant <cpu>`, loaded by kforge's loader."""
    import os
    import subprocess

    from kforge import get_local_kernel

    kforge = Path(os.environ.get("KFORGE_BIN", ROOT.parent.parent / "target" / "debug" / "kforge"))
    if not kforge.is_file():
        pytest.fail(f"kforge binary not found at {kforge}; run `cargo build -p kforge-cli` or set KFORGE_BIN")
    out = tmp_path_factory.mktemp("fp8_gemm_build")
    variant = "torch211-cxx11-cpu-x86_64-linux"
    subprocess.run([str(kforge), "build", str(ROOT), "--variant", variant, "--out", str(out)], check=True)
    return get_local_kernel(out, backend="cpu")


@pytest.fixture(scope="session")
def fp8_gemm_cuda(tmp_path_factory):
    """The CUDA .so named by FP8GEMM_SO (from `kforge build kernels/fp8-gemm --backend cuda`); GPU only."""
    import os

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    so = os.environ.get("FP8GEMM_SO")
    if not so:
        pytest.skip("set FP8GEMM_SO to the .so of `kforge build kernels/fp8-gemm --backend cuda`")
    torch.ops.load_library(so)
    return make_package(tmp_path_factory.mktemp("fp8_gemm_cuda"), Path(so).name.split(".")[0])
