"""The genuine `kernels` loader (0.17.2) loads a kernel from a kforge hub, uploaded by `kforge push`.

The kernel is a tiny noarch (pure Python, `torch-universal`) variant, which every host accepts; the end-to-end
suite covers compiled variants. `kernels` reads HF_ENDPOINT at import time, so each load runs in a fresh
interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from support.kforge_hub import Hub, kforge_bin

VARIANT = "torch-universal"

LOAD = """
import sys, kernels
trust = sys.argv[3] == "trust"
repo, version = sys.argv[1], int(sys.argv[2])
k = kernels.get_kernel(repo, version=version, trust_remote_code=trust)
assert kernels.has_kernel(repo, version=version, trust_remote_code=trust)
accepted = [type(v).__name__ for v in kernels.get_kernel_variants(repo, version=version)]
print(k.add(40, 2), k.VERSION, k.__name__, *accepted)
"""


def make_project(root: Path, version: int, body: str) -> Path:
    """A project directory with one built noarch variant, as `kforge build` lays it out."""
    variant = root / "build" / VARIANT
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text(f"from ._impl import add\n\nVERSION = {version}\n")
    (variant / "_impl.py").write_text(f"def add(a, b):\n    {body}\n")
    metadata = {
        "name": "tiny",
        "id": f"_tiny_universal_{version:07d}",
        "version": version,
        "license": "Apache-2.0",
        "python-depends": [],
        "kernel-depends": [],
        "backend": {"type": "cpu"},
    }
    (variant / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    return root


def push(hub: Hub, token: str, project: Path, repo: str) -> str:
    cmd = [str(kforge_bin()), "push", str(project), "--repo", repo]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **hub.env(token)}, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def load(hub: Hub, tmp_path: Path, repo: str, version: int, trust: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, **hub.env(), "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_TOKEN": ""}
    env.pop("KERNELS_CACHE", None)
    env.pop("LOCAL_KERNELS", None)
    return subprocess.run(
        [sys.executable, "-c", LOAD, repo, str(version), "trust" if trust else "no-trust"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def test_get_kernel_loads_pushed_versions(kforge_hub, tmp_path):
    token = kforge_hub.token("alice", orgs=["acme"])
    out = push(kforge_hub, token, make_project(tmp_path / "p1", 1, "return a + b"), "acme/tiny")
    assert "acme/tiny@v1" in out and f"build/{VARIANT}" in out
    push(kforge_hub, token, make_project(tmp_path / "p2", 2, "return a * b"), "acme/tiny")

    api = HfApi(endpoint=kforge_hub.url, token=token)
    refs = api.list_repo_refs("acme/tiny", repo_type="kernel")
    assert sorted(b.name for b in refs.branches) == ["main", "v1", "v2"]
    # The model card goes to main, the artifacts to the version branches.
    assert api.list_repo_files("acme/tiny", repo_type="kernel") == ["README.md"]
    assert sorted(api.list_repo_files("acme/tiny", repo_type="kernel", revision="v1")) == [
        f"build/{VARIANT}/__init__.py",
        f"build/{VARIANT}/_impl.py",
        f"build/{VARIANT}/metadata.json",
    ]

    # acme is not a trusted publisher yet: the loader refuses unless the caller opts in.
    refused = load(kforge_hub, tmp_path, "acme/tiny", 1, trust=False)
    assert refused.returncode != 0
    assert "not from a trusted publisher" in refused.stderr

    v1 = load(kforge_hub, tmp_path, "acme/tiny", 1, trust=True)
    assert v1.returncode == 0, v1.stderr
    assert v1.stdout.split() == ["42", "1", "_tiny_universal_0000001", "VariantAccepted"]

    kforge_hub.trust("acme")
    v2 = load(kforge_hub, tmp_path, "acme/tiny", 2, trust=False)
    assert v2.returncode == 0, v2.stderr
    assert v2.stdout.split() == ["80", "2", "_tiny_universal_0000002", "VariantAccepted"]


def test_unknown_version_is_reported(kforge_hub, tmp_path):
    token = kforge_hub.token("alice", orgs=["acme"])
    push(kforge_hub, token, make_project(tmp_path / "p", 1, "return a + b"), "acme/tiny")
    missing = load(kforge_hub, tmp_path, "acme/tiny", 7, trust=True)
    assert missing.returncode != 0
    assert "Version 7 not found, available versions: 1" in missing.stderr


@pytest.mark.parametrize("private", [False, True])
def test_pull_round_trips_byte_identical(kforge_hub, tmp_path, private):
    token = kforge_hub.token("alice", orgs=["acme"])
    project = make_project(tmp_path / "p", 3, "return a - b")
    (project / "build" / VARIANT / "blob.bin").write_bytes(os.urandom(300_000))
    cmd = [str(kforge_bin()), "push", str(project), "--repo", "acme/pulled"]
    cmd += ["--private"] if private else []
    env = {**os.environ, **kforge_hub.env(token)}
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=120, check=False).returncode == 0

    dest = tmp_path / "dest"
    pull = [str(kforge_bin()), "pull", "acme/pulled", "--version", "3", "--dest", str(dest)]
    done = subprocess.run(pull, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    src = project / "build"
    got = {p.relative_to(dest / "build"): p.read_bytes() for p in (dest / "build").rglob("*") if p.is_file()}
    want = {p.relative_to(src): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    assert got == want
    assert [p.name for p in dest.iterdir()] == ["build"]  # no staging leftovers

    if private:
        anonymous = {**os.environ, **kforge_hub.env(), "HF_TOKEN": ""}
        denied = subprocess.run(pull, env=anonymous, capture_output=True, text=True, timeout=120, check=False)
        assert denied.returncode != 0
        assert "404" in denied.stderr and "Repository Not Found" in denied.stderr
