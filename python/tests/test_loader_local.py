"""Loading real on-disk variant trees: digest checks, import isolation, bad input, LOCAL_KERNELS, kernel
deps."""

import json
import shutil
import subprocess
import sys
import uuid

import kforge
import pytest
import torch
from kernel_trees import build_extension, make_tree, make_variant, native_variant_name
from kforge.errors import DigestMismatchError, KernelImportError, MetadataError
from kforge.metadata import compute_digest


def _ns():
    return f"_relu_cpu_{uuid.uuid4().hex[:7]}"


def test_native_variant_loads_and_runs(tmp_path):
    ns = _ns()
    mod = kforge.get_local_kernel(make_tree(tmp_path, ns=ns), backend="cpu")
    assert sys.modules[ns] is mod
    x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])
    assert torch.equal(mod.relu(x), torch.tensor([0.0, 0.0, 0.0, 1.5, 3.0]))
    assert hasattr(torch.ops, ns)
    loaded = [k for k in kforge.get_loaded_kernels() if k.metadata.id == ns]
    assert len(loaded) == 1 and loaded[0].repo_info is None
    assert loaded[0].metadata.name == "relu" and loaded[0].metadata.backend.backend_type == "cpu"
    assert kforge.get_local_kernel(tmp_path, backend="cpu") is mod  # memoized per path
    # the build/ folder and the variant dir itself are accepted too (reference §1.1)
    assert kforge.get_local_kernel(tmp_path / "build", backend="cpu") is mod
    assert kforge.get_local_kernel(tmp_path / "build" / native_variant_name(), backend="cpu") is mod


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


def test_tampered_native_library_refused(tmp_path):
    ns = _ns()
    make_tree(tmp_path, ns=ns, noarch=False)
    so = tmp_path / "build" / native_variant_name() / f"_{ns}.abi3.so"
    data = bytearray(so.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the trailing section table padding still changes the hash
    so.write_bytes(bytes(data))
    with pytest.raises(DigestMismatchError, match=rf"hash mismatch .*_{ns}\.abi3\.so"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    assert ns not in sys.modules
    with pytest.raises((AttributeError, RuntimeError)):  # never dlopen'ed, so no op is registered
        _ = getattr(torch.ops, ns).relu


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


def test_pycache_is_not_part_of_the_digest(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    cache = tmp_path / "build" / "torch-cpu" / "__pycache__"
    cache.mkdir()
    (cache / "x.cpython-311.pyc").write_bytes(b"\0" * 16)
    kforge.get_local_kernel(tmp_path, backend="cpu")


def test_tamper_after_first_load_detected(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    kforge.get_local_kernel(tmp_path, backend="cpu")
    init = tmp_path / "build" / "torch-cpu" / "__init__.py"
    init.write_text("EVIL = 2\n")
    with pytest.raises(DigestMismatchError, match="hash mismatch"):
        kforge.get_local_kernel(tmp_path, backend="cpu")


def test_bad_metadata_json(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    md = tmp_path / "build" / "torch-cpu" / "metadata.json"
    md.write_text("{not json")
    with pytest.raises(MetadataError, match="metadata.json: not valid JSON"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    md.write_text(json.dumps({"name": "relu", "id": "_x", "version": "one"}))
    with pytest.raises(MetadataError, match=r"key 'version' must be an integer major version, got 'one'"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    md.write_text(json.dumps({"name": "Relu!", "id": "_x"}))
    with pytest.raises(MetadataError, match=r"key 'name' must be lowercase"):
        kforge.get_local_kernel(tmp_path, backend="cpu")


def test_broken_native_library_is_a_clear_import_error(tmp_path):
    """A real .so with an undefined symbol: the error names the symbol and the variant, nothing stays
    imported."""
    ns = _ns()
    d = tmp_path / "build" / native_variant_name()
    d.mkdir(parents=True)
    shutil.copy(build_extension(ns, broken=True), d / "_broken.abi3.so")
    init = (
        "import torch\nfrom pathlib import Path\n"
        "torch.ops.load_library(str(Path(__file__).with_name('_broken.abi3.so')))\n"
    )
    make_variant(d, {"__init__.py": init, "helper.py": "X = 1\n"}, name="relu", id_=ns)
    with pytest.raises(KernelImportError) as ei:
        kforge.get_local_kernel(tmp_path, backend="cpu")
    msg = str(ei.value)
    assert "undefined symbol: kforge_test_symbol_that_does_not_exist" in msg
    assert native_variant_name() in msg and "rebuild the kernel" in msg
    assert isinstance(ei.value, ImportError)
    assert ns not in sys.modules and not [m for m in sys.modules if m.startswith(ns + ".")]


def test_failing_python_code_is_reported_with_the_variant(tmp_path):
    ns = _ns()
    make_variant(
        tmp_path / "build" / "torch-cpu",
        {"__init__.py": "from . import sub\n", "sub.py": "raise RuntimeError('boom')\n"},
        name="relu",
        id_=ns,
    )
    with pytest.raises(KernelImportError, match=r"variant torch-cpu failed: RuntimeError: boom"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    assert ns not in sys.modules and f"{ns}.sub" not in sys.modules


def test_no_compatible_variant_lists_each_rejection_and_the_closest(tmp_path):
    for name in ("torch211-cxx11-cu130-x86_64-linux", "torch29-cxx11-cpu-x86_64-linux", "torch-cuda"):
        d = tmp_path / "build" / name
        d.mkdir(parents=True)
        (d / "metadata.json").write_text('{"name": "relu", "id": "_relu_x_1234567"}')
    with pytest.raises(kforge.NoCompatibleVariantError) as ei:
        kforge.get_local_kernel(tmp_path, backend="cpu")
    msg = str(ei.value)
    assert "torch211-cxx11-cu130-x86_64-linux  backend cu130 != host backend cpu" in msg
    assert "torch29-cxx11-cpu-x86_64-linux" in msg and "torch 2.9 != installed torch 2.11" in msg
    assert "torch-cuda                         noarch backend cuda != host backend cpu" in msg
    assert "Closest: torch211-cxx11-cu130-x86_64-linux (backend cu130 != host backend cpu)" in msg
    assert "torch 2.11, cxx11=True, cpu, x86_64-linux" in msg
    assert [r.name for r in ei.value.trace] == sorted(r.name for r in ei.value.trace) or len(
        ei.value.trace
    ) == 3
    assert isinstance(
        ei.value, FileNotFoundError
    )  # what kernels raises, so kernelize's CANNOT_LOAD catches it


def test_two_versions_side_by_side(tmp_path):
    a, b = _ns(), _ns()
    ma = kforge.get_local_kernel(make_tree(tmp_path / "a", ns=a, noarch=False), backend="cpu")
    mb = kforge.get_local_kernel(make_tree(tmp_path / "b", ns=b, noarch=False), backend="cpu")
    assert ma is not mb and sys.modules[a] is ma and sys.modules[b] is mb
    x = torch.tensor([-1.0, 2.0])
    assert torch.equal(ma.relu(x), mb.relu(x))


def test_two_builds_claiming_one_id_are_refused(tmp_path):
    ns = _ns()
    first = kforge.get_local_kernel(make_tree(tmp_path / "a", ns=ns, native=False), backend="cpu")
    # The same build copied elsewhere (identical metadata and digest) is the module already loaded.
    shutil.copytree(tmp_path / "a", tmp_path / "copy", symlinks=True)
    assert kforge.get_local_kernel(tmp_path / "copy", backend="cpu") is first
    other = make_tree(tmp_path / "b", ns=ns, native=False)
    (other / "build" / "torch-cpu" / "__init__.py").write_text("X = 'another build'\n")
    meta = json.loads((other / "build" / "torch-cpu" / "metadata.json").read_text())
    meta["digest"]["files"] = compute_digest(other / "build" / "torch-cpu")
    (other / "build" / "torch-cpu" / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ImportError, match="claims the same metadata id"):
        kforge.get_local_kernel(other, backend="cpu")


def test_python_depends_allowlist_and_minver(tmp_path):
    d = make_variant(
        tmp_path / "a" / "build" / "torch-cpu",
        {"__init__.py": ""},
        name="relu",
        id_=_ns(),
        **{"python-depends": ["requests"]},
    )
    with pytest.raises(
        MetadataError, match=r"unsupported kernel dependency 'requests'.*allowed for backend cpu"
    ):
        kforge.get_local_kernel(d.parent.parent, backend="cpu")
    d = make_variant(
        tmp_path / "b" / "build" / "torch-cpu",
        {"__init__.py": ""},
        name="relu",
        id_=_ns(),
        **{"python-depends": ["einops"]},
    )
    if __import__("importlib").util.find_spec("einops") is None:
        with pytest.raises(ImportError, match="pip install einops"):
            kforge.get_local_kernel(d.parent.parent, backend="cpu")
    d = make_variant(
        tmp_path / "c" / "build" / "torch-cpu",
        {"__init__.py": ""},
        name="relu",
        id_=_ns(),
        **{"kernels-minver": "0.99.0"},
    )
    with pytest.raises(RuntimeError, match="needs kernels >= 0.99.0"):
        kforge.get_local_kernel(d.parent.parent, backend="cpu")


def test_local_kernels_override_and_kernel_dependencies(tmp_path, monkeypatch):
    """get_kernel honours LOCAL_KERNELS (no hub at all); a kernel's kernel-depends are loaded first and
    reachable through get_kernel_dep while its __init__ runs."""
    act, dep = _ns(), _ns()
    make_variant(
        tmp_path / "act" / "build" / "torch-cpu",
        {"__init__.py": "def silu(x):\n    return x * (1 / (1 + (-x).exp()))\n"},
        name="act",
        id_=act,
    )
    init = (
        "import kforge\n_act = kforge.get_kernel_dep('org/act')\n\n"
        "def swish2(x):\n    return 2 * _act.silu(x)\n"
    )
    make_variant(
        tmp_path / "top" / "build" / "torch-cpu",
        {"__init__.py": init},
        name="top",
        id_=dep,
        **{"kernel-depends": [{"repo-id": "org/act", "version": 1}]},
    )
    import os

    monkeypatch.setenv(
        "LOCAL_KERNELS", os.pathsep.join([f"org/act={tmp_path / 'act'}", f"org/top={tmp_path / 'top'}"])
    )
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # any request would fail
    top = kforge.get_kernel("org/top", version=1, backend="cpu")
    x = torch.linspace(-2, 2, 9)
    assert torch.allclose(top.swish2(x), 2 * torch.nn.functional.silu(x))
    assert sys.modules[act] is top._act
    with pytest.raises(RuntimeError, match="only be called while a kernel is being loaded"):
        kforge.get_kernel_dep("org/act")
    monkeypatch.setenv("LOCAL_KERNELS", "org-without-path")
    with pytest.raises(ValueError, match="LOCAL_KERNELS entry 'org-without-path': expected org/name=/path"):
        kforge.get_kernel("org/top", version=1)


def test_version_and_revision_rules():
    with pytest.raises(ValueError, match="give version= .* or revision="):
        kforge.get_kernel("org/relu")
    with pytest.raises(ValueError, match="only one of version="):
        kforge.get_kernel("org/relu", version=1, revision="main")
    with pytest.raises(TypeError):
        kforge.get_kernel("org/relu", 1)  # keyword-only since 0.17


def test_backend_argument_validated(tmp_path):
    make_tree(tmp_path, ns=_ns(), native=False)
    with pytest.raises(
        ValueError, match=r"backend='metal' is not supported on this host: use 'cpu' or 'cuda'"
    ):
        kforge.get_local_kernel(tmp_path, backend="metal")


def test_interop_with_hf_kernels(tmp_path):
    """The genuine kernels 0.17.2 and kforge load the same tree and give the same results (separate
    processes)."""
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
        r = subprocess.run(
            [sys.executable, "-c", prog.format(lib=lib), str(tmp_path)], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        outs[lib] = r.stdout.strip().splitlines()[-1]
    assert outs["kforge"] == outs["kernels"]
    assert outs["kforge"] == f"{ns} [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]"


def test_digest_is_computed_exactly_as_genuine_kernels_does(tmp_path):
    """kforge's digest (what it verifies on load) equals kernels 0.17.2's own Digest.hash_variant."""
    from kernels._rust import Digest, DigestAlgorithm

    d = make_variant(
        tmp_path / "torch-cpu",
        {
            "__init__.py": "X = 1\n",
            "sub/_ops.py": "Y = 2\n",
            "__pycache__/a.cpython-311.pyc": "",
            "stale.pyc": "",
        },
        name="relu",
        id_=_ns(),
    )
    (d / "metadata.json.sigstore").write_text("{}")
    for algorithm in ("sha256", "sha512"):
        theirs = Digest.hash_variant(getattr(DigestAlgorithm, algorithm.upper()), d)
        assert dict(theirs.files) == compute_digest(d, algorithm)
    assert sorted(compute_digest(d)) == ["__init__.py", "sub/_ops.py"]


def test_hf_layout_with_package_dir_only(tmp_path):
    """Pre-flattening HF layout: build/<variant>/<python_name>/__init__.py with relative imports, HF metadata
    keys (kernels-minver, provenance with the `sha` alias, upstream)."""
    ns = _ns()
    files = {
        "my_relu/__init__.py": "from ._impl import relu\n",
        "my_relu/_impl.py": "import torch\n\ndef relu(x):\n    return torch.clamp_min(x, 0)\n",
    }
    make_variant(
        tmp_path / "build" / "torch-cpu",
        files,
        name="my-relu",
        id_=ns,
        **{
            "kernels-minver": "0.17.0",
            "upstream": "https://github.com/org/relu",
            "provenance": {"kernel-builder": {"version": "0.17.0", "sha": "abc", "dirty": False}},
        },
    )
    mod = kforge.get_local_kernel(tmp_path, backend="cpu")
    assert mod.__name__ == ns and mod.relu(torch.tensor([-1.0, 3.0])).tolist() == [0.0, 3.0]
    assert sys.modules[ns + "._impl"].__name__ == ns + "._impl"
    meta = kforge.get_loaded_kernels()[-1].metadata
    assert (meta.python_name, meta.kernels_minver, meta.upstream) == (
        "my_relu",
        "0.17.0",
        "https://github.com/org/relu",
    )
