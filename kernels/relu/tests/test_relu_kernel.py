"""kernels/relu built with `kforge build` and loaded with HF's genuine `kernels.get_local_kernel`.

The CPU variant is built once per session into a temporary directory and compared with torch.relu.
The CUDA test needs a GPU: it builds the cu130 variant (or uses $KFORGE_RELU_BUILD, a directory holding
build/<variant>/ dirs built elsewhere) and runs on the first CUDA device.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from kernels import get_local_kernel

PROJECT = Path(__file__).resolve().parent.parent
REPO = PROJECT.parent.parent
CPU_VARIANT = "torch211-cxx11-cpu-x86_64-linux"
CUDA_VARIANT = "torch211-cxx11-cu130-x86_64-linux"


def kforge_bin() -> Path:
    path = Path(os.environ.get("KFORGE_BIN", REPO / "target" / "debug" / "kforge"))
    if not path.is_file():
        pytest.fail(f"kforge binary not found at {path}; run `cargo build -p kforge-cli` or set KFORGE_BIN")
    return path


def build_variant(out: Path, variant: str) -> Path:
    """`kforge build kernels/relu --variant VARIANT --out OUT`; returns OUT."""
    subprocess.run(
        [str(kforge_bin()), "build", str(PROJECT), "--variant", variant, "--out", str(out)],
        check=True,
    )
    return out


@pytest.fixture(scope="session")
def cpu_build(tmp_path_factory) -> Path:
    return build_variant(tmp_path_factory.mktemp("relu-build"), CPU_VARIANT)


@pytest.fixture(scope="session")
def relu(cpu_build):
    return get_local_kernel(cpu_build, backend="cpu")


def test_variant_layout_and_metadata(cpu_build):
    variant = cpu_build / CPU_VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    assert meta["name"] == "relu"
    assert meta["id"].startswith("_relu_cpu_")
    assert meta["backend"] == {"type": "cpu"}
    assert meta["kernel-depends"] == []
    names = sorted(p.name for p in variant.iterdir())
    assert names == sorted(["__init__.py", "_ops.py", "metadata.json", f"{meta['id']}.abi3.so"])
    assert sorted(meta["digest"]["files"]) == sorted(n for n in names if n != "metadata.json")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(0,), (7,), (3, 1000), (257, 129, 3)])
def test_matches_torch_relu(relu, dtype, shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    assert torch.equal(relu.relu(x), torch.relu(x))


def test_nan_and_infinities_behave_like_torch(relu):
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -1.5, 2.5])
    got = relu.relu(x)
    want = torch.relu(x)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[1:], want[1:])


def test_out_argument_is_written_and_returned(relu):
    x = torch.linspace(-3, 3, 101)
    out = torch.full_like(x, 42.0)
    result = relu.relu(x, out=out)
    assert result is out
    assert torch.equal(out, torch.relu(x))


def test_non_contiguous_input(relu):
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(1)).t()
    assert not x.is_contiguous()
    assert torch.equal(relu.relu(x), torch.relu(x))


def test_bad_out_is_a_clear_error(relu):
    x = torch.randn(10)
    with pytest.raises(RuntimeError, match=r"relu: out has shape \[3\] but input has shape \[10\]"):
        relu.relu(x, out=torch.empty(3))
    with pytest.raises(RuntimeError, match="relu: out has dtype Double but input has dtype Float"):
        relu.relu(x, out=torch.empty(10, dtype=torch.float64))


def test_ops_are_registered_in_the_kernel_namespace(relu):
    ops_module = importlib.import_module(f"{relu.__name__}._ops")
    namespace = relu.__name__
    assert ops_module.add_op_namespace_prefix("relu") == f"{namespace}::relu"
    out = torch.empty(4)
    getattr(torch.ops, namespace).relu(out, torch.tensor([-1.0, 0.5, -2.0, 3.0]))
    assert out.tolist() == [0.0, 0.5, 0.0, 3.0]


@pytest.mark.gpu
def test_cuda_variant_matches_torch_relu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    prebuilt = os.environ.get("KFORGE_RELU_BUILD")
    root = Path(prebuilt) if prebuilt else build_variant(tmp_path, CUDA_VARIANT)
    relu = get_local_kernel(root, backend="cuda")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(1 << 20, 3, generator=torch.Generator().manual_seed(2)).to(dtype).cuda()
        x[0, 0] = float("nan")
        got = relu.relu(x)
        torch.cuda.synchronize()
        want = torch.relu(x)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(), want.nan_to_num())
    with pytest.raises(RuntimeError, match="relu: input must be a CUDA tensor"):
        relu.relu(torch.randn(3), out=torch.empty(3, device="cuda"))
