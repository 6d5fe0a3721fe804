"""Builds the CPU variant once per session with torch's extension builder and exposes it as `fp8_gemm`."""

import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXT_NAME = "_fp8_gemm_cpu_dev"

# Stand-in for the registration.h that `kforge build` generates (same macros, same behaviour).
REGISTRATION_H = textwrap.dedent(
    """
    #pragma once
    #include <Python.h>
    #define _CONCAT(A, B) A##B
    #define CONCAT(A, B) _CONCAT(A, B)
    #define _STRINGIFY(A) #A
    #define STRINGIFY(A) _STRINGIFY(A)
    #define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
    #define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
    #define REGISTER_EXTENSION(NAME)                                                    \\
      PyMODINIT_FUNC CONCAT(PyInit_, NAME)() {                                          \\
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME),     \\
                                            nullptr, 0, nullptr};                       \\
        return PyModule_Create(&module);                                                \\
      }
    """
)


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
    import subprocess
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    work = tmp_path_factory.mktemp("fp8_gemm_build")
    (work / "registration.h").write_text(REGISTRATION_H)
    so = work / f"{EXT_NAME}.so"
    includes = [work, ROOT / "torch-ext", *cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    libdir = Path(torch.__file__).parent / "lib"
    cmd = ["g++", "-O3", "-std=c++17", "-shared", "-fPIC", "-fopenmp", "-DCPU_KERNEL"]
    cmd += [f"-DTORCH_EXTENSION_NAME={EXT_NAME}", "-D_GLIBCXX_USE_CXX11_ABI=1"]
    cmd += [f"-I{p}" for p in includes]
    cmd += [str(ROOT / "torch-ext/torch_binding.cpp"), str(ROOT / "gemm_cpu/gemm_cpu.cpp")]
    cmd += [f"-L{libdir}", "-lc10", "-ltorch", "-ltorch_cpu", f"-Wl,-rpath,{libdir}", "-o", str(so)]
    subprocess.run(cmd, check=True)
    torch.ops.load_library(str(so))
    return make_package(work, EXT_NAME)


@pytest.fixture(scope="session")
def fp8_gemm_cuda(tmp_path_factory):
    """The CUDA build named by FP8GEMM_SO (built by bench/build_fp8_gemm_dev.sh); GPU tests only."""
    import os

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    so = os.environ.get("FP8GEMM_SO")
    if not so:
        pytest.skip("set FP8GEMM_SO to the CUDA build of fp8-gemm (bench/build_fp8_gemm_dev.sh)")
    torch.ops.load_library(so)
    return make_package(tmp_path_factory.mktemp("fp8_gemm_cuda"), Path(so).name.split(".")[0])
