"""get_kernel & friends against a REAL `kforge hub serve` on 127.0.0.1, with kernels uploaded by the genuine
huggingface_hub client. A counting proxy in front of the hub proves the request counts (zero for a cached
commit-pinned load); loads run in fresh processes so no in-process memo hides a request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from counting_proxy import CountingProxy
from kernel_trees import make_tree, make_variant, native_variant_name
from support.kforge_hub import kforge_bin, start_hub

ORG = "kforge-test"


def _publish(api, repo_id: str, build_dir: Path, branch: str = "v1") -> str:
    api.create_repo(repo_id, repo_type="kernel", exist_ok=True)
    api.create_branch(repo_id, repo_type="kernel", branch=branch, exist_ok=True)
    api.upload_folder(
        repo_id=repo_id, repo_type="kernel", folder_path=build_dir, path_in_repo="build", revision=branch
    )
    refs = api.list_repo_refs(repo_id, repo_type="kernel")
    return next(b.target_commit for b in refs.branches if b.name == branch)


ACT = "def silu(x):\n    return x * (1 / (1 + (-x).exp()))\n"
TOP = (
    "import kforge\nfrom . import layers\n_act = kforge.get_kernel_dep('kforge-test/act')\n\n"
    "def swish2(x):\n    return 2 * _act.silu(x)\n"
)
TOP_LAYERS = """import torch


class Double(torch.nn.Module):
    def forward(self, x):
        return 2 * x + 0.5
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from huggingface_hub import HfApi

    tmp = tmp_path_factory.mktemp("hub")
    server = start_hub(tmp)
    try:
        token = server.token("alice", orgs=[ORG, "untrusted-org"])
        subprocess.run(
            [str(kforge_bin()), "hub", "org", "trust", ORG, "--data", str(server.data_dir)], check=True
        )
        api = HfApi(endpoint=server.url, token=token)
        ns = f"_relu_cpu_{uuid.uuid4().hex[:7]}"
        relu = make_tree(tmp / "relu", ns=ns)
        commit = _publish(api, f"{ORG}/relu", relu / "build")
        untrusted = make_tree(tmp / "untrusted", ns=f"_relu_cpu_{uuid.uuid4().hex[:7]}", native=False)
        _publish(api, "untrusted-org/relu", untrusted / "build")
        other = tmp / "other" / "build"
        for name in ("torch211-cxx11-cu130-x86_64-linux", "torch211-cxx11-cpu-aarch64-linux"):
            make_variant(other / name, {"__init__.py": ""}, name="gemm", id_=f"_gemm_{uuid.uuid4().hex[:7]}")
        _publish(api, f"{ORG}/gemm", other)
        # a kernel with a kernel dependency and a layer, for get_kernel_dep and the locked layer API
        act = tmp / "act" / "build" / "torch-cpu"
        make_variant(act, {"__init__.py": ACT}, name="act", id_=f"_act_cpu_{uuid.uuid4().hex[:7]}")
        _publish(api, f"{ORG}/act", act.parent)
        top = tmp / "top" / "build" / "torch-cpu"
        make_variant(
            top,
            {"__init__.py": TOP, "layers.py": TOP_LAYERS},
            name="top",
            id_=f"_top_cpu_{uuid.uuid4().hex[:7]}",
            **{"kernel-depends": [{"repo-id": f"{ORG}/act", "version": 1}]},
        )
        _publish(api, f"{ORG}/top", top.parent)
        proxy = CountingProxy(server.url)
        yield SimpleNamespace(server=server, token=token, api=api, ns=ns, commit=commit, proxy=proxy, tmp=tmp)
        proxy.close()
    finally:
        server.stop()


def _run(hub, code: str, **env) -> dict:
    """Run `code` in a fresh Python pointed at the proxy; it prints one JSON line last. Returns it, plus the
    requests the proxy saw."""
    hub.proxy.reset()
    full_env = {
        **os.environ,
        "HF_ENDPOINT": hub.proxy.url,
        "HF_TOKEN": hub.token,
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    full_env.update({k: str(v) for k, v in env.items() if v is not None})
    for k in [k for k, v in env.items() if v is None]:
        full_env.pop(k, None)
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["requests"] = list(hub.proxy.requests)
    return out


def _guarded(code: str, exception: str) -> str:
    """`code` run inside try/except kforge.<exception>, printing {"raised": message} when it is raised."""
    body = textwrap.indent(code.strip(), "    ")
    handler = f"except kforge.{exception} as e:\n    print(json.dumps({{'raised': str(e)}}))\n"
    return f"import json, kforge\ntry:\n{body}\n{handler}"


LOAD = """
import json, torch, kforge
x = torch.linspace(-3, 3, 13)
m = kforge.get_kernel("kforge-test/relu", {pin}, backend="cpu")
print(json.dumps({{"name": m.__name__, "ok": torch.equal(m.relu(x), torch.relu(x)), "file": m.__file__}}))
"""


def test_cold_warm_pinned_version_and_offline_loads(hub):
    """Cold load downloads and runs; a cached commit-pinned load makes zero requests; version=N makes one
    (refs); version=N works offline after one online load."""
    cold = _run(hub, LOAD.format(pin="version=1"))
    assert cold["ok"] and cold["name"] == hub.ns
    assert f"/snapshots/{hub.commit}/build/{native_variant_name()}/__init__.py" in cold["file"]
    assert any("/refs" in p for _, p in cold["requests"]), cold["requests"]
    pinned = _run(hub, LOAD.format(pin=f"revision={hub.commit!r}"))
    assert pinned["ok"] and pinned["requests"] == []
    by_version = _run(hub, LOAD.format(pin="version=1"))
    assert by_version["ok"] and by_version["requests"] == [("GET", "/api/kernels/kforge-test/relu/refs")]
    offline = _run(hub, LOAD.format(pin="version=1"), HF_HUB_OFFLINE=1)
    assert offline["ok"] and offline["requests"] == []
    print(cold["requests"])
    print(f"\nrequests: cold {len(cold['requests'])}, warm version=1 {len(by_version['requests'])}, pinned 0")


def test_genuine_kernels_loads_kforge_hub_kernel(hub):
    """kernels 0.17.2 (HF) loads the same kforge-hub kernel and gets the same result."""
    code = """
import json, torch, kernels
x = torch.linspace(-3, 3, 13)
m = kernels.get_kernel("kforge-test/relu", version=1, backend="cpu", trust_remote_code=True)
print(json.dumps({"name": m.__name__, "ok": torch.equal(m.relu(x), torch.relu(x))}))
"""
    # kernels + huggingface_hub 2.4 with HF_HUB_DISABLE_TELEMETRY=1 send a User-Agent ending in "; ", which
    # httpx refuses before any request is made: leave telemetry settings at their defaults here.
    first = _run(hub, code, HF_HUB_DISABLE_TELEMETRY=None)
    assert first == {**first, "ok": True, "name": hub.ns}
    warm = _run(hub, code, HF_HUB_DISABLE_TELEMETRY=None)
    # kernels resolves refs and lists the tree again on every load (reference §4.1)
    assert warm["ok"] and {p.split("?")[0] for _, p in warm["requests"]} >= {
        "/api/kernels/kforge-test/relu/refs",
        f"/api/kernels/kforge-test/relu/tree/{hub.commit}/build",
    }
    print(f"\nkernels 0.17.2: cold {len(first['requests'])} requests, warm {len(warm['requests'])}")


def test_trust_is_checked_and_persisted(hub):
    code = """
import json, kforge
try:
    kforge.get_kernel("untrusted-org/relu", version=1, backend="cpu")
    print(json.dumps({"raised": None}))
except kforge.UntrustedPublisherError as e:
    print(json.dumps({"raised": str(e)}))
"""
    out = _run(hub, code)
    assert "'untrusted-org' is not a trusted kernel publisher" in out["raised"]
    assert "trust_remote_code=['untrusted-org/relu']" in out["raised"]
    assert not any("/resolve/" in p for _, p in out["requests"])  # refused before downloading anything
    allowed = _run(
        hub, code.replace('backend="cpu"', 'backend="cpu", trust_remote_code=["untrusted-org/relu"]')
    )
    assert allowed["raised"] is None
    # Offline, a cached untrusted kernel still needs the explicit opt-in (kernels skips the check offline).
    offline = _run(hub, code, HF_HUB_OFFLINE=1)
    assert "is not a trusted kernel publisher (cannot check offline)" in offline["raised"]
    assert offline["requests"] == []


@pytest.fixture
def at_hub(hub, monkeypatch):
    """In-process access to the hub (kforge reads HF_ENDPOINT per call)."""
    monkeypatch.setenv("HF_ENDPOINT", hub.server.url)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    return hub


def test_unknown_repo_version_and_revision(at_hub):
    import kforge

    with pytest.raises(
        kforge.KernelRepoNotFoundError, match="kernel repo 'kforge-test/nope' not found on http"
    ):
        kforge.get_kernel("kforge-test/nope", version=1, backend="cpu")
    with pytest.raises(kforge.KernelVersionNotFoundError, match="has no version 7 .*available versions: 1"):
        kforge.get_kernel("kforge-test/relu", version=7, backend="cpu")
    with pytest.raises(kforge.RevisionNotFoundError, match="has no revision 'no-such-branch'"):
        kforge.get_kernel("kforge-test/relu", revision="no-such-branch", backend="cpu")


def test_no_compatible_variant_table_and_variants_api(at_hub):
    import kforge

    with pytest.raises(kforge.NoCompatibleVariantError) as ei:
        kforge.get_kernel("kforge-test/gemm", version=1, backend="cpu")
    msg = str(ei.value)
    assert f"no kernel variant in {ORG}/gemm@" in msg
    assert "torch211-cxx11-cpu-aarch64-linux   CPU aarch64 != host CPU x86_64" in msg
    assert "torch211-cxx11-cu130-x86_64-linux  backend cu130 != host backend cpu" in msg
    assert "Closest: torch211-cxx11-cu130-x86_64-linux" in msg
    assert kforge.has_kernel("kforge-test/gemm", version=1, backend="cpu") is False
    assert kforge.has_kernel("kforge-test/relu", version=1, backend="cpu", trust_remote_code=True) is True
    trace = kforge.get_kernel_variants("kforge-test/relu", version=1, backend="cpu")
    assert [(type(t).__name__, t.name) for t in trace] == [
        ("VariantAccepted", native_variant_name()),
        ("VariantAccepted", "torch-cpu"),
    ]


def test_offline_load_after_has_kernel_says_not_cached(at_hub, monkeypatch):
    """has_kernel fetches only metadata.json; offline, the load must say the variant was never downloaded,
    not report a digest mismatch (which reads as tampering)."""
    import kforge

    assert kforge.has_kernel("kforge-test/relu", version=1, backend="cpu", trust_remote_code=True) is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="only partly cached") as ei:
        kforge.get_kernel("kforge-test/relu", version=1, backend="cpu", trust_remote_code=True)
    msg = str(ei.value)
    assert "__init__.py" in msg and "load it once online" in msg
    assert not isinstance(ei.value, kforge.DigestMismatchError)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    import torch

    x = torch.tensor([-1.0, 0.0, 1.0])
    assert kforge.get_kernel("kforge-test/relu", version=1, backend="cpu").relu(x).tolist() == [0.0, 0.0, 1.0]


def test_install_kernel_and_tampered_cache(at_hub):
    import kforge

    d = kforge.install_kernel("kforge-test/relu", version=1, backend="cpu")
    assert d.name == native_variant_name() and d.parent.parent.name == at_hub.commit
    init = d / "__init__.py"
    target = init.resolve()  # the HF cache blob behind the snapshot symlink
    target.chmod(0o644)
    target.write_text(target.read_text() + "\nEVIL = 1\n")
    code = _guarded(LOAD.format(pin=f"revision={at_hub.commit!r}"), "DigestMismatchError")
    out = _run(at_hub, code)
    assert "hash mismatch" in out["raised"] and f"{native_variant_name()}/__init__.py" in out["raised"]
    assert out["requests"] == []


def _project(tmp: Path, deps: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "pyproject.toml").write_text(f'[project]\nname = "app"\nversion = "0"\n\n{deps}')
    return tmp


def _kforge(hub, *args) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.server.url,
        "HF_TOKEN": hub.token,
        "KFORGE_PYTHON": sys.executable,
    }
    return subprocess.run(
        [str(kforge_bin()), *map(str, args)], capture_output=True, text=True, env=env, timeout=300
    )


def test_kforge_lock_download_and_locked_loads(hub, tmp_path):
    project = _project(tmp_path / "app", '[tool.kernels.dependencies]\n"kforge-test/relu" = 1\n')
    r = _kforge(hub, "lock", project)
    assert r.returncode == 0, r.stderr
    lock = json.loads((project / "kernels.lock").read_text())
    assert len(lock) == 1 and lock[0]["dependency"] == {"repo-id": "kforge-test/relu", "version": 1}
    assert lock[0]["lock"] == {"commit": hub.commit}
    assert set(lock[0]["variants"]) == {native_variant_name(), "torch-cpu"}
    assert all(v["hash_type"] == "metadata_sha256" for v in lock[0]["variants"].values())

    r = _kforge(hub, "lock", project, "--format", "kernels")
    assert r.returncode == 0, r.stderr
    from kernels._rust import KernelLocks  # the genuine kernels 0.17.2 parser accepts the bare format

    assert len(KernelLocks.from_json((project / "kernels.lock").read_text()).keys()) == 1
    assert _kforge(hub, "lock", project).returncode == 0  # back to the hashed format

    r = _kforge(hub, "download", project, "--backend", "cpu")
    assert r.returncode == 0, r.stderr
    assert f"downloaded kforge-test/relu@{hub.commit[:12]} {native_variant_name()}" in r.stdout
    r = _kforge(hub, "download", project, "--all-variants")
    assert r.returncode == 0, r.stderr
    assert "torch-cpu ->" in r.stdout and f"{native_variant_name()} ->" in r.stdout
    assert "2 variant(s) downloaded and verified" in r.stdout

    code = f"""
import json, torch, kforge
from pathlib import Path
m = kforge.load_kernel("kforge-test/relu", lockfile=Path({str(project / "kernels.lock")!r}), backend="cpu")
x = torch.tensor([-1.0, 2.0])
print(json.dumps({{"ok": m.relu(x).tolist() == [0.0, 2.0]}}))
"""
    out = _run(hub, code, HF_HUB_OFFLINE=1)
    assert out["ok"] and out["requests"] == []

    # A lock whose hash does not match what is cached is refused, naming the lock file and the variant.
    bad = json.loads((project / "kernels.lock").read_text())
    bad[0]["variants"][native_variant_name()]["hash"] = "sha256-" + "0" * 64
    (project / "bad.lock").write_text(json.dumps(bad))
    code = _guarded(code.replace("kernels.lock", "bad.lock"), "LockError")
    out = _run(hub, code, HF_HUB_OFFLINE=1)
    assert "differs from sha256-000" in out["raised"] and "bad.lock" in out["raised"]
    assert native_variant_name() in out["raised"]


def test_kforge_lock_bad_input(hub, tmp_path):
    r = _kforge(
        hub, "lock", _project(tmp_path / "a", '[tool.kernels.dependencies]\n"kforge-test/relu" = ">=1"\n')
    )
    assert r.returncode == 1
    assert "'kforge-test/relu' = '>=1': expected an integer major version" in r.stderr
    r = _kforge(hub, "lock", _project(tmp_path / "b", ""))
    assert r.returncode == 1 and "no [tool.kernels.dependencies] table" in r.stderr
    r = _kforge(
        hub, "lock", _project(tmp_path / "c", '[tool.kernels.dependencies]\n"kforge-test/relu" = 9\n')
    )
    assert r.returncode == 1 and "has no version 9" in r.stderr


def test_kernel_dependencies_from_the_hub(at_hub):
    """kernel-depends are resolved on the hub and loaded first; the kernel reaches them with
    get_kernel_dep."""
    import kforge
    import torch

    top = kforge.get_kernel("kforge-test/top", version=1, backend="cpu")
    x = torch.linspace(-2, 2, 5)
    assert torch.allclose(top.swish2(x), 2 * torch.nn.functional.silu(x))
    loaded = {k.repo_info.repo_id for k in kforge.get_loaded_kernels() if k.repo_info}
    assert {"kforge-test/top", "kforge-test/act"} <= loaded


def test_locked_layer_repository_kernelizes_from_the_hub(at_hub, tmp_path):
    """get_locked_kernel through LockedLayerRepository: the locked commit, hash-checked, feeds kernelize."""
    import kforge
    import torch
    from torch import nn

    project = _project(tmp_path / "app", '[tool.kernels.dependencies]\n"kforge-test/top" = 1\n')
    r = _kforge(at_hub, "lock", project)
    assert r.returncode == 0, r.stderr
    lock = json.loads((project / "kernels.lock").read_text())
    assert [e["dependency"]["repo-id"] for e in lock] == ["kforge-test/top", "kforge-test/act"]  # transitive

    @kforge.use_kernel_forward_from_hub("Double")
    class Double(nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return 2 * x

    repo = kforge.LockedLayerRepository(
        "kforge-test/top", lockfile=project / "kernels.lock", layer_name="Double"
    )
    with kforge.use_kernel_mapping({"Double": {"cpu": repo}}):
        model = kforge.kernelize(Double(), mode=kforge.Mode.INFERENCE)
    assert model(torch.tensor([1.0])).tolist() == [2.5]


def test_locked_load_takes_dependencies_from_the_lock(at_hub, tmp_path, monkeypatch):
    """kernels' locked resolvers resolve the whole tree through the lock. kforge loaded a locked kernel's
    kernel-depends by their branch (v1 as it is now, not the locked commit), and load_kernel then refused
    an untrusted-org dependency offline, because only the top repo counted as trusted by the lock."""
    import kforge

    suffix = uuid.uuid4().hex[:7]
    dep_id, top_id = f"untrusted-org/dep-{suffix}", f"untrusted-org/top-{suffix}"
    init = f"import kforge\nDEP = kforge.get_kernel_dep({dep_id!r})\n"
    # pure Python, for get_locked_kernel (no backend argument) on a CPU or a CUDA build of torch
    for backend in ("cpu", "cuda"):
        make_variant(
            tmp_path / "dep" / "build" / f"torch-{backend}",
            {"__init__.py": "VALUE = 'locked'\n"},
            name="dep",
            id_=f"_dep_{suffix}_{backend}_a",
        )
        make_variant(
            tmp_path / "top" / "build" / f"torch-{backend}",
            {"__init__.py": init},
            name="top",
            id_=f"_top_{suffix}_{backend}",
            **{"kernel-depends": [{"repo-id": dep_id, "version": 1}]},
        )
        make_variant(
            tmp_path / "moved" / "build" / f"torch-{backend}",
            {"__init__.py": "VALUE = 'moved'\n"},
            name="dep",
            id_=f"_dep_{suffix}_{backend}_b",
        )
    locked_commit = _publish(at_hub.api, dep_id, tmp_path / "dep" / "build")
    top_commit = _publish(at_hub.api, top_id, tmp_path / "top" / "build")
    moved = _publish(at_hub.api, dep_id, tmp_path / "moved" / "build")
    assert moved != locked_commit  # branch v1 of the dependency moved on after locking

    def entry(repo_id, commit):
        return {"dependency": {"repo-id": repo_id, "version": 1}, "lock": {"commit": commit}}

    lockfile = tmp_path / "kernels.lock"
    lockfile.write_text(json.dumps([entry(top_id, top_commit)]))
    with pytest.raises(kforge.LockError, match=rf"kernels.lock: no entry for {dep_id}"):
        kforge.get_locked_kernel(top_id, lockfile=lockfile, trust_remote_code=True)
    lockfile.write_text(json.dumps([entry(top_id, top_commit), entry(dep_id, locked_commit)]))
    mod = kforge.get_locked_kernel(top_id, lockfile=lockfile, trust_remote_code=True)
    assert mod.DEP.VALUE == "locked"
    assert f"/snapshots/{locked_commit}/" in mod.DEP.__file__
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert kforge.load_kernel(top_id, lockfile=lockfile) is mod
