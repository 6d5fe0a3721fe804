"""Tests of the built kernel: run `kforge build` in the project directory first."""

from pathlib import Path

import pytest
import torch

PROJECT = Path(__file__).resolve().parents[1]


_LOADED = {}


def load(device):
    """The build for `device`: the cpu variant for "cpu", the GPU variant torch was built for otherwise."""
    from kernels import get_local_kernel

    if not (PROJECT / "build").is_dir():
        pytest.fail(f"no build/ directory in {PROJECT}: run `kforge build` there first")
    if device not in _LOADED:
        _LOADED[device] = get_local_kernel(PROJECT, backend="cpu" if device == "cpu" else None)
    return _LOADED[device]


def devices():
    out = ["cpu"] if {{has_cpu}} else []
    if {{has_gpu}} and torch.cuda.is_available():
        out.append("cuda")
    return out


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_torch_relu(device, dtype):
    kernel = load(device)
    torch.manual_seed(0)
    x = torch.randn(1000, 33, device=device, dtype=dtype)
    assert torch.equal(kernel.{{py}}(x), torch.relu(x))


@pytest.mark.parametrize("device", devices())
def test_non_contiguous_input_and_out(device):
    kernel = load(device)
    x = torch.randn(64, 48, device=device).t()
    out = torch.full((48, 64), 7.0, device=device)
    result = kernel.{{py}}(x, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, torch.relu(x))


@pytest.mark.parametrize("device", devices())
def test_nan_and_signed_zero_follow_torch(device):
    kernel = load(device)
    x = torch.tensor([float("nan"), -0.0, 0.0, -1.0, 2.5, float("inf")], device=device)
    assert torch.equal(kernel.{{py}}(x).isnan(), torch.relu(x).isnan())
    assert torch.equal(kernel.{{py}}(x).nan_to_num(), torch.relu(x).nan_to_num())


@pytest.mark.parametrize("device", devices())
def test_empty(device):
    kernel = load(device)
    x = torch.empty(0, 5, device=device)
    assert kernel.{{py}}(x).shape == (0, 5)


@pytest.mark.parametrize("device", devices())
def test_rejects_mismatched_out(device):
    kernel = load(device)
    x = torch.randn(8, device=device)
    with pytest.raises(RuntimeError, match="expected the dtype of input"):
        kernel.{{py}}(x, out=torch.empty(8, device=device, dtype=torch.float64))
