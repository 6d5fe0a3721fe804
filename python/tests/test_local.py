"""get_local_kernel on real trees, digest verification and tampering, import isolation, interop with kernels."""

import json
import subprocess
import sys
import uuid

import pytest
import torch

import kforge
from kforge.metadata import DigestMismatchError, MetadataError

from kernel_trees import make_tree, native_variant_name


def _ns():
    return f"_relu_cpu_{uuid.uuid4().hex[:7]}"


def test_native_variant_loads_and_runs(tmp_path):
    ns = _ns()
    mod = kforge.get_local_kernel(make_tree(tmp_path, ns=ns), backend="cpu")
    assert sys.modules[ns] is mod
    x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])
    assert torch.equal(mod.relu(x), torch.relu(x))
    assert hasattr(torch.ops, ns)
    loaded = [k for k in kforge.get_loaded_kernels() if k.metadata.id == ns]
    assert len(loaded) == 1 and loaded[0].repo_info is None
    # memoized per path
    assert kforge.get_local_kernel(tmp_path, backend="cpu") is mod


def test_noarch_variant_when_only_noarch(tmp_path):
    ns = _ns()
    mod = kforge.get_local_kernel(make_tree(tmp_path, ns=ns, native=False), backend="cpu")
    assert mod.__name__ == ns + "_noarch"
    x = torch.randn(64)
    assert torch.equal(mod.relu(x), torch.relu(x))


def test_tampered_file_refused_and_named(tmp_path):
    ns = _ns()
    make_tree(tmp_path, ns=ns, native=False)
    init = tmp_path / "build" / "torch-cpu" / "__init__.py"
    init.write_text(init.read_text() + "\nEVIL = 1\n")
    with pytest.raises(DigestMismatchError, match=r"hash mismatch .*torch-cpu/__init__.py"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    assert ns + "_noarch" not in sys.modules


def test_extra_and_missing_files_refused(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    d = tmp_path / "build" / "torch-cpu"
    (d / "extra.py").write_text("x = 1\n")
    with pytest.raises(DigestMismatchError, match="unknown file .*extra.py"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    (d / "extra.py").unlink()
    (d / "__init__.py").unlink()
    with pytest.raises(DigestMismatchError, match="missing file .*__init__.py"):
        kforge.get_local_kernel(tmp_path, backend="cpu")


def test_tamper_after_first_load_detected(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    kforge.get_local_kernel(tmp_path, backend="cpu")
    init = tmp_path / "build" / "torch-cpu" / "__init__.py"
    init.write_text("EVIL = 2\n")
    with pytest.raises(DigestMismatchError):
        kforge.get_local_kernel(tmp_path, backend="cpu")


def test_bad_metadata_json(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    (tmp_path / "build" / "torch-cpu" / "metadata.json").write_text("{not json")
    with pytest.raises(MetadataError, match="metadata.json: not valid JSON"):
        kforge.get_local_kernel(tmp_path, backend="cpu")


def test_failing_import_leaves_nothing_in_sys_modules(tmp_path):
    ns = _ns()
    make_tree(tmp_path, ns=ns, native=False)
    d = tmp_path / "build" / "torch-cpu"
    (d / "__init__.py").write_text("raise ImportError('undefined symbol: foo')\n")
    meta = json.loads((d / "metadata.json").read_text())
    del meta["digest"]
    (d / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ImportError, match="undefined symbol") as ei:
        kforge.get_local_kernel(tmp_path, backend="cpu")
    assert ns + "_noarch" not in sys.modules
    assert any("torch-cpu" in n for n in ei.value.__notes__)


def test_no_compatible_variant_lists_each_rejection(tmp_path):
    d = tmp_path / "build" / "torch211-cxx11-cu130-x86_64-linux"
    d.mkdir(parents=True)
    (d / "metadata.json").write_text('{"name": "relu", "id": "_relu_cuda_1234567"}')
    d2 = tmp_path / "build" / "torch29-cxx11-cpu-x86_64-linux"
    d2.mkdir()
    (d2 / "metadata.json").write_text('{"name": "relu", "id": "_relu_cpu_1234567"}')
    with pytest.raises(kforge.NoCompatibleVariantError) as ei:
        kforge.get_local_kernel(tmp_path, backend="cpu")
    msg = str(ei.value)
    assert "torch211-cxx11-cu130-x86_64-linux  backend cu130 != host backend cpu" in msg
    assert "torch29-cxx11-cpu-x86_64-linux" in msg and "torch 2.9 != installed torch" in msg
    assert "cpu, x86_64-linux" in msg


def test_two_versions_side_by_side(tmp_path):
    a, b = _ns(), _ns()
    ma = kforge.get_local_kernel(make_tree(tmp_path / "a", ns=a, noarch=False), backend="cpu")
    mb = kforge.get_local_kernel(make_tree(tmp_path / "b", ns=b, noarch=False), backend="cpu")
    assert ma is not mb and sys.modules[a] is ma and sys.modules[b] is mb


def test_interop_with_hf_kernels(tmp_path):
    """The genuine kernels 0.17.2 and kforge load the same tree and give the same results (separate processes)."""
    ns = _ns()
    make_tree(tmp_path, ns=ns, noarch=False)
    prog = (
        "import sys, torch, {lib}\n"
        "m = {lib}.get_local_kernel(__import__('pathlib').Path(sys.argv[1]), backend='cpu')\n"
        "x = torch.linspace(-3, 3, 13)\n"
        "print(m.__name__, m.relu(x).tolist())\n"
    )
    outs = {}
    for lib in ("kforge", "kernels"):
        r = subprocess.run([sys.executable, "-c", prog.format(lib=lib), str(tmp_path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs[lib] = r.stdout.strip().splitlines()[-1]
    assert outs["kforge"] == outs["kernels"]
    assert outs["kforge"].startswith(ns + " [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5")
    assert native_variant_name() in str(list((tmp_path / "build").iterdir()))
