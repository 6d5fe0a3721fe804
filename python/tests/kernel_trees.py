"""Real kernel variant trees for the tests: a g++-compiled torch extension and pure-python variants."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from kforge.metadata import compute_digest

CPP = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
static at::Tensor relu_cpu(const at::Tensor& x) { return x.clamp_min(0); }
TORCH_LIBRARY(NS, m) { m.def("relu(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(NS, CPU, m) { m.impl("relu", &relu_cpu); }
"""

OPS_PY = """import torch
from pathlib import Path

torch.ops.load_library(str(Path(__file__).with_name("_NS.abi3.so")))
ops = torch.ops.NS


def add_op_namespace_prefix(name: str) -> str:
    return f"NS::{name}"
"""

INIT_PY = """from ._ops import ops


def relu(x):
    return ops.relu(x)
"""

NOARCH_INIT_PY = """import torch


def relu(x):
    return torch.where(x > 0, x, torch.zeros_like(x))
"""


def _cache_root() -> Path:
    return Path(os.environ.get("KFORGE_TEST_CACHE", Path.home() / ".cache" / "kforge-tests"))


BROKEN_CPP = r"""
extern "C" int kforge_test_symbol_that_does_not_exist(int);
extern "C" int kforge_broken_entry(int x) { return kforge_test_symbol_that_does_not_exist(x); }
"""


def build_extension(ns: str, *, broken: bool = False) -> Path:
    """Compile the relu op into `_<ns>.abi3.so` with g++ against torch's headers; cached by content.
    broken=True gives a library with an undefined symbol, as a build against another torch would."""
    import torch
    from torch.utils import cpp_extension

    src = BROKEN_CPP if broken else CPP.replace("NS", ns)
    key = hashlib.sha256((src + torch.__version__).encode()).hexdigest()[:16]
    out = _cache_root() / key / f"_{ns}.abi3.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cpp = out.with_suffix(".cpp")
    cpp.write_text(src)
    inc = [f"-I{p}" for p in cpp_extension.include_paths()]
    lib = Path(torch.__file__).parent / "lib"
    abi = int(torch.compiled_with_cxx11_abi())
    tmp = out.with_name(out.name + ".tmp")
    cmd = [
        "g++",
        "-O1",
        "-shared",
        "-fPIC",
        "-std=c++17",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *inc,
        f"-I{sysconfig.get_paths()['include']}",
        str(cpp),
        f"-L{lib}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{lib}",
        "-o",
        str(tmp),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    os.replace(tmp, out)
    return out


def write_metadata(variant_dir: Path, *, name: str, id_: str, backend: str, digest: bool = True) -> None:
    meta = {
        "name": name,
        "id": id_,
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "kernel-depends": [],
        "backend": {"type": backend},
    }
    if digest:
        meta["digest"] = {"algorithm": "sha256", "files": compute_digest(variant_dir)}
    (variant_dir / "metadata.json").write_text(json.dumps(meta, indent=2))


def native_variant_name() -> str:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    return f"torch{major}{minor}-{abi}-cpu-x86_64-linux"


def make_tree(root: Path, *, ns: str, native: bool = True, noarch: bool = True) -> Path:
    """root/build/<variants>; returns root."""
    if native:
        d = root / "build" / native_variant_name()
        d.mkdir(parents=True)
        shutil.copy(build_extension(ns), d / f"_{ns}.abi3.so")
        (d / "_ops.py").write_text(OPS_PY.replace("NS", ns))
        (d / "__init__.py").write_text(INIT_PY)
        write_metadata(d, name="relu", id_=ns, backend="cpu")
    if noarch:
        d = root / "build" / "torch-cpu"
        d.mkdir(parents=True)
        (d / "__init__.py").write_text(NOARCH_INIT_PY)
        write_metadata(d, name="relu", id_=ns + "_noarch", backend="cpu")
    return root


def make_variant(
    variant_dir: Path,
    files: dict[str, str],
    *,
    name: str,
    id_: str,
    backend: str = "cpu",
    digest: bool = True,
    **extra,
) -> Path:
    """A variant dir holding `files` (relative path -> text) and a metadata.json (extra keys merged in)."""
    variant_dir.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (variant_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (variant_dir / rel).write_text(text)
    write_metadata(variant_dir, name=name, id_=id_, backend=backend, digest=digest)
    if extra:
        meta = json.loads((variant_dir / "metadata.json").read_text())
        meta.update(extra)
        (variant_dir / "metadata.json").write_text(json.dumps(meta, indent=2))
    return variant_dir
