"""Bad input and damaged caches: every case fails with a kforge error that names the argument or the file,
before any request, and leaves nothing half-written; plus API parity with the genuine kernels 0.17."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import threading
import uuid
from pathlib import Path

import kforge
import pytest
from kernel_trees import make_variant
from kforge.errors import DigestMismatchError, MetadataError

UNREACHABLE = "http://127.0.0.1:9"  # any request fails with "connection refused"
HAS_KERNELS = importlib.util.find_spec("kernels") is not None


def _id(prefix="_k"):
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def no_hub(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE)


def _cache() -> Path:
    return Path(os.environ["KERNELS_CACHE"])


@pytest.mark.parametrize(
    ("repo_id", "exc", "message"),
    [
        ("relu", ValueError, r"repo_id 'relu' is not a kernel repo id: expected 'org/name'"),
        ("a/b/c", ValueError, r"repo_id 'a/b/c' is not a kernel repo id"),
        ("org/re--lu", ValueError, r"no '--' or '\.\.'"),
        ("org/..", ValueError, r"repo_id 'org/\.\.' is not a kernel repo id"),
        ("org/relu-", ValueError, r"is not a kernel repo id"),
        (Path("org/relu"), TypeError, r"repo_id must be a str 'org/name', got PosixPath"),
        (None, TypeError, r"repo_id must be a str 'org/name', got NoneType"),
    ],
)
@pytest.mark.parametrize("fn", ["get_kernel", "has_kernel", "install_kernel", "get_kernel_variants"])
def test_bad_repo_ids_fail_before_any_request(no_hub, fn, repo_id, exc, message):
    """Used to reach the hub client: a raw HFValidationError, AttributeError, or a connection error."""
    with pytest.raises(exc, match=message):
        getattr(kforge, fn)(repo_id, version=1)
    assert not _cache().exists()  # nothing written for a bad call
    with pytest.raises(exc, match=message):
        kforge.LayerRepository(repo_id, layer_name="Relu", version=1)


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        ({"revision": 1}, TypeError, r"revision must be a str .*got int 1; for major version 1 use version="),
        ({"revision": "../../../etc"}, ValueError, r"revision '\.\./\.\./\.\./etc' is not a branch, tag"),
        ({"revision": "main/"}, ValueError, r"is not a branch, tag or commit name"),
        ({"version": -1}, ValueError, r"version must be a major version >= 0 .*got -1"),
        ({"version": True}, TypeError, r"version must be an int major version"),
        ({"version": "1"}, TypeError, r"version must be an int major version .*got '1'"),
        ({"version": 1, "backend": ["cpu"]}, TypeError, r"backend must be a str .*got \['cpu'\]"),
        ({"version": 1, "trust_remote_code": "yes"}, TypeError, r"trust_remote_code must be a bool"),
    ],
)
@pytest.mark.parametrize("fn", ["get_kernel", "has_kernel", "install_kernel"])
def test_bad_arguments_name_the_argument(no_hub, monkeypatch, fn, kwargs, exc, message):
    """Each used to fail inside kforge (len() of an int, an unhashable backend in functools.cache) or only
    after a request; `revision='../..'` offline read a file outside the cache."""
    with pytest.raises(exc, match=message):
        getattr(kforge, fn)("org/relu", **kwargs)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(exc, match=message):
        getattr(kforge, fn)("org/relu", **kwargs)
    assert not _cache().exists()


def test_unreachable_hub_is_a_clear_connection_error(no_hub):
    with pytest.raises(kforge.HubConnectionError) as ei:
        kforge.get_kernel("org/relu", version=1, backend="cpu")
    msg = str(ei.value)
    assert f"cannot reach the hub at {UNREACHABLE} for org/relu" in msg and "HF_HUB_OFFLINE=1" in msg
    assert isinstance(ei.value, ConnectionError)  # an OSError: kernelize's CANNOT_LOAD covers it
    with pytest.raises(kforge.HubConnectionError):
        kforge.has_kernel("org/relu", version=1)  # a network error raises, as in kernels


def _cached_commit(repo_id: str, commit: str, *, init: str = "X = 1\n", name: str = "kk") -> Path:
    """A variant in the HF cache layout, as a download would leave it; returns the variant dir."""
    snap = _cache() / ("kernels--" + repo_id.replace("/", "--")) / "snapshots" / commit / "build"
    return make_variant(snap / "torch-cpu", {"__init__.py": init}, name=name, id_=_id())


def _state(repo_id: str, commit: str) -> Path:
    return _cache() / ".kforge" / ("kernels--" + repo_id.replace("/", "--")) / f"{commit}.json"


def test_corrupted_cached_ref_is_named(monkeypatch):
    """Offline, a damaged refs/v1 used to be taken as the commit ('no variant of org/y@garbage is cached')."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ref = _cache() / "kernels--org--y" / "refs" / "v1"
    ref.parent.mkdir(parents=True)
    ref.write_text("garbage\n")
    with pytest.raises(kforge.KernelVersionNotFoundError, match=r"refs/v1 \(the cached commit of org/y@v1\)"):
        kforge.get_kernel("org/y", version=1, backend="cpu")
    commit = "e" * 40
    ref.write_text(commit)  # a good ref resolves to its commit (and then to the cached variant)
    _cached_commit("org/y", commit, init="VALUE = 7\n")
    assert kforge.get_kernel("org/y", version=1, backend="cpu", trust_remote_code=True).VALUE == 7


@pytest.mark.parametrize(
    "state",
    [
        {"variants": ["torch-cpu"], "trusted_publisher": True, "verified": []},  # AttributeError before
        {"variants": "torch-cpu", "trusted_publisher": True, "verified": {}},  # split into characters
        {"variants": ["torch-cpu"], "trusted_publisher": "no", "verified": {}},  # truthy: was trusted
        {"variants": ["torch-cpu"], "trusted_publisher": True, "verified": {"torch-cpu": 5}},
        ["not", "an", "object"],
    ],
)
def test_corrupted_commit_state_is_discarded(monkeypatch, state):
    """A damaged <cache>/.kforge/<commit>.json is ignored as a whole, its trust decision included."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = uuid.uuid4().hex + "abcdef01"
    _cached_commit("org/k", commit, init="VALUE = 3\n")
    path = _state("org/k", commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    with pytest.raises(kforge.UntrustedPublisherError, match=r"cannot check offline"):
        kforge.get_kernel("org/k", revision=commit, backend="cpu")
    assert kforge.get_kernel("org/k", revision=commit, backend="cpu", trust_remote_code=True).VALUE == 3


def test_well_formed_commit_state_is_still_used(monkeypatch):
    """The control for the test above: a valid recorded trust decision is honoured offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = uuid.uuid4().hex + "abcdef01"
    _cached_commit("org/k", commit, init="VALUE = 4\n")
    path = _state("org/k", commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"variants": ["torch-cpu"], "trusted_publisher": True, "verified": {}}))
    assert kforge.get_kernel("org/k", revision=commit, backend="cpu").VALUE == 4
    saved = json.loads(path.read_text())
    assert saved["trusted_publisher"] is True and saved["verified"]["torch-cpu"][0][0] == "metadata.json"


def test_broken_blob_link_is_a_digest_error(monkeypatch):
    """A snapshot symlink whose blob was deleted used to escape as a raw FileNotFoundError from os.stat."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = "c" * 40
    d = _cached_commit("org/k", commit)
    (d / "__init__.py").unlink()
    (d / "__init__.py").symlink_to("../../../../blobs/0123abcd")
    with pytest.raises(DigestMismatchError, match=r"broken link .*torch-cpu/__init__.py \(its blob .*0123"):
        kforge.get_kernel("org/k", revision=commit, backend="cpu", trust_remote_code=True)
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["id"] not in sys.modules


def test_unreadable_metadata_is_a_metadata_error(tmp_path):
    d = tmp_path / "build" / "torch-cpu"
    (d / "metadata.json").mkdir(parents=True)  # was a raw IsADirectoryError
    with pytest.raises(MetadataError, match=r"torch-cpu/metadata.json: cannot read it \(Is a directory\)"):
        kforge.get_local_kernel(tmp_path, backend="cpu")
    (d / "metadata.json").rmdir()
    (d / "metadata.json").symlink_to(tmp_path / "gone")
    with pytest.raises(MetadataError, match=r"metadata.json: broken link"):
        kforge.get_local_kernel(d, backend="cpu")


def test_kernel_depends_version_must_be_an_int(tmp_path):
    """`"version": true` passed the metadata check and failed later inside the hub code."""
    d = make_variant(
        tmp_path / "build" / "torch-cpu",
        {"__init__.py": ""},
        name="kk",
        id_=_id(),
        **{"kernel-depends": [{"repo-id": "org/a", "version": True}]},
    )
    with pytest.raises(MetadataError, match=r"metadata.json: kernel-depends\[0\] must be .*'version': True"):
        kforge.get_local_kernel(d, backend="cpu")


def test_has_kernel_follows_kernels(tmp_path, monkeypatch):
    """False for any FileNotFoundError (offline and not cached, as in kernels) and when a kernel dependency
    has no variant for this system; True only when the whole tree fits."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert kforge.has_kernel("org/absent", revision="a" * 40, backend="cpu") is False  # raised before
    make_variant(
        tmp_path / "top" / "build" / "torch-cpu",
        {"__init__.py": ""},
        name="top",
        id_=_id(),
        **{"kernel-depends": [{"repo-id": "org/dep", "version": 1}]},
    )
    make_variant(tmp_path / "dep" / "build" / "torch-cuda", {"__init__.py": ""}, name="dep", id_=_id())
    monkeypatch.setenv(
        "LOCAL_KERNELS", os.pathsep.join([f"org/top={tmp_path / 'top'}", f"org/dep={tmp_path / 'dep'}"])
    )
    assert kforge.has_kernel("org/top", version=1, backend="cpu") is False  # was True
    make_variant(tmp_path / "dep" / "build" / "torch-cpu", {"__init__.py": ""}, name="dep", id_=_id())
    assert kforge.has_kernel("org/top", version=1, backend="cpu") is True


def test_local_dependency_cycle_is_reported(tmp_path, monkeypatch):
    """Through LOCAL_KERNELS a cycle used to recurse until RecursionError."""
    for me, other in (("a", "b"), ("b", "a")):
        make_variant(
            tmp_path / me / "build" / "torch-cpu",
            {"__init__.py": ""},
            name=me * 2,
            id_=_id(),
            **{"kernel-depends": [{"repo-id": f"org/{other}", "version": 1}]},
        )
    monkeypatch.setenv("LOCAL_KERNELS", os.pathsep.join(f"org/{n}={tmp_path / n}" for n in "ab"))
    with pytest.raises(ValueError, match=r"kernel dependency cycle: org/a -> org/b -> org/a"):
        kforge.get_kernel("org/a", version=1, backend="cpu")
    with pytest.raises(ValueError, match=r"kernel dependency cycle: org/a -> org/b -> org/a"):
        kforge.install_kernel("org/a", version=1, backend="cpu")


def test_concurrent_loads_of_one_kernel_share_one_module(tmp_path):
    """A second thread used to see the first one's half-imported module in sys.modules and refuse the kernel
    as 'a different build claims the same metadata id'."""
    make_variant(
        tmp_path / "build" / "torch-cpu",
        {"__init__.py": "import time\ntime.sleep(0.3)\nREADY = True\n"},
        name="slow",
        id_=_id("_slow"),
    )
    results: list = []
    barrier = threading.Barrier(3)

    def load():
        barrier.wait()
        try:
            results.append(kforge.get_local_kernel(tmp_path, backend="cpu"))
        except Exception as e:  # noqa: BLE001 - the assertion below shows it
            results.append(e)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, type(sys)) for r in results), results
    assert len({id(r) for r in results}) == 1 and results[0].READY is True


def test_concurrent_cache_writes_never_collide(tmp_path):
    """_atomic_write used one temporary name per process: two threads writing the same file failed with
    FileNotFoundError (the other thread had already renamed it) and could leave a partial temporary."""
    from kforge.hub import _atomic_write

    target = tmp_path / "refs" / "v1"
    errors: list = []

    def write(i):
        try:
            for _ in range(100):
                _atomic_write(target, f"{i:040d}")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_text() in {f"{i:040d}" for i in range(4)}
    assert sorted(p.name for p in target.parent.iterdir()) == ["v1"]  # no temporary left behind


@pytest.mark.parametrize(
    ("archs", "capability", "covered"),
    [
        (["9.0a+PTX"], (10, 0), False),  # the 'a' suffix wins over +PTX: exact capability only
        (["9.0a+PTX"], (9, 0), True),
        (["10.0f+PTX"], (12, 0), False),  # family: same major only, even with +PTX
        (["10.0f+PTX"], (10, 3), True),
        ([" 9.0"], (8, 0), None),  # not an arch string (int() accepted the space)
        (["+9.0"], (8, 0), None),
        (["9.0.1", "8.0"], (8, 6), True),
    ],
)
def test_cuda_arch_suffix_precedence(archs, capability, covered):
    from kforge.loader import _cuda_archs_cover

    assert _cuda_archs_cover(archs, *capability) is covered


@pytest.mark.skipif(not HAS_KERNELS, reason="the genuine kernels package is not installed")
def test_cuda_arch_check_equals_genuine_kernels():
    """The arch check is part of variant selection, which must equal kernels 0.17's."""
    import itertools

    from kernels.archs import _supports_cuda_capability
    from kforge.loader import _cuda_archs_cover

    archs = ["8.0", "9.0a", "10.0f", "8.0+PTX", "9.0a+PTX", "10.0f+PTX", "sm_90", "+9.0", " 9.0", "12.1", ""]
    caps = [(7, 5), (8, 0), (8, 6), (9, 0), (9, 1), (10, 0), (10, 3), (12, 0), (12, 1)]
    combos = [list(c) for n in (1, 2) for c in itertools.combinations(archs, n)]
    differ = []
    for combo, cap in itertools.product(combos, caps):
        ours = _cuda_archs_cover(combo, *cap)
        if (True if ours is None else ours) != _supports_cuda_capability(combo, cap):
            differ.append((combo, cap))
    assert differ == []


@pytest.mark.parametrize(
    ("name", "call", "message"),
    [
        ("use_kernel_func_from_hub", lambda f: f("silu"), r"use_kernel_func_from_hub: it was deprecated"),
        ("FuncRepository", lambda c: c("org/a", func_name="f", version=1), r"FuncRepository: .*Layer"),
        ("LocalFuncRepository", lambda c: c("/x", func_name="f"), r"LocalFuncRepository"),
        ("LockedFuncRepository", lambda c: c("org/a", func_name="f"), r"LockedFuncRepository"),
        ("Benchmark", lambda c: type("B", (c,), {}), r"Benchmark: kforge has no benchmark runner"),
    ],
)
def test_unsupported_names_import_and_fail_clearly(name, call, message):
    """docs/loader.md: not implemented. They were missing, so `from kforge import X` (code written for
    kernels) failed with a bare ImportError / AttributeError."""
    obj = getattr(__import__("kforge", fromlist=[name]), name)
    with pytest.raises(NotImplementedError, match=message):
        call(obj)


@pytest.mark.skipif(not HAS_KERNELS, reason="the genuine kernels package is not installed")
def test_public_api_matches_genuine_kernels():
    """Every name of kernels.__all__ exists in kforge, and every callable takes the same parameters: same
    names, kinds and defaults (kforge may add defaults where kernels has none)."""
    import kernels

    assert set(kernels.__all__) - set(kforge.__all__) == set()
    problems = []
    for name in sorted(kernels.__all__):
        theirs, ours = getattr(kernels, name), getattr(kforge, name)
        skip = name.startswith("_") or name in ("Metadata", "Benchmark") or "Func" in name
        if skip or not callable(theirs):
            continue
        try:
            want = inspect.signature(theirs).parameters
        except (TypeError, ValueError):
            continue
        have = inspect.signature(ours).parameters
        for p in want.values():
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                if not any(q.kind is p.kind for q in have.values()):
                    problems.append(f"{name}: no *{p.name}")
                continue
            q = have.get(p.name)
            if q is None or q.kind != p.kind:
                problems.append(f"{name}: parameter {p.name} ({p.kind}) is {q}")
            elif p.default is not inspect.Parameter.empty and q.default != p.default:
                problems.append(f"{name}: {p.name} defaults to {q.default!r}, kernels {p.default!r}")
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        extra = [
            n for n, q in have.items() if n not in want and q.default is q.empty and q.kind not in variadic
        ]
        if extra:
            problems.append(f"{name}: extra required parameters {extra}")
    assert problems == []
