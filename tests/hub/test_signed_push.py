"""`kforge push --sign KEY` end to end: the signature travels through the hub, and `kforge.get_kernel`
enforces the trust file (docs/signing.md) on what it downloads: signed by the publisher's key → loads;
unsigned or signed by another key → refused before import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kforge.metadata import compute_digest
from support.kforge_hub import Hub, kforge_bin

LOAD = """
import sys
from kforge import get_kernel
k = get_kernel(sys.argv[1], version=1, trust_remote_code=True)
print("loaded", k.ANSWER)
"""


def run_kforge(*args: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(kforge_bin()), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_project(root: Path, ns: str) -> Path:
    """A project with one built noarch variant; metadata.json carries the digest as kforge build writes it."""
    variant = root / "build" / "torch-universal"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("ANSWER = 42\n")
    meta = {
        "name": "signed",
        "id": ns,
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "kernel-depends": [],
        "backend": {"type": "cpu"},
        "digest": {"algorithm": "sha256", "files": compute_digest(variant)},
    }
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return root


def load(hub: Hub, tmp_path: Path, repo: str, trust_file: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **hub.env(),
        "HF_HOME": str(tmp_path / f"home-{repo.replace('/', '-')}"),
        "KFORGE_TRUST": str(trust_file),
    }
    env.pop("KERNELS_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", LOAD, repo], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_signed_push_loads_and_unsigned_or_foreign_is_refused(kforge_hub, tmp_path):
    token = kforge_hub.token("alice", orgs=["acme"])
    hub_env = kforge_hub.env(token)
    run_kforge("key", "generate", "--out", tmp_path / "acme.key")
    run_kforge("key", "generate", "--out", tmp_path / "other.key")
    public = (tmp_path / "acme.key.pub").read_text().strip()
    trust_file = tmp_path / "trust.toml"
    trust_file.write_text(f'[publishers.acme]\nkeys = ["{public}"]\nrequire-signature = true\n')

    signed = make_project(tmp_path / "signed", "_signed_universal_a")
    out = run_kforge("push", signed, "--repo", "acme/signed", "--sign", tmp_path / "acme.key", env=hub_env)
    assert "1 variant(s) signed" in out
    assert (signed / "build" / "torch-universal" / "metadata.json.kforge-sig").is_file()
    unsigned = make_project(tmp_path / "unsigned", "_signed_universal_b")
    run_kforge("push", unsigned, "--repo", "acme/unsigned", env=hub_env)
    foreign = make_project(tmp_path / "foreign", "_signed_universal_c")
    run_kforge("push", foreign, "--repo", "acme/foreign", "--sign", tmp_path / "other.key", env=hub_env)

    ok = load(kforge_hub, tmp_path, "acme/signed", trust_file)
    assert ok.returncode == 0 and "loaded 42" in ok.stdout, ok.stderr
    for repo in ("acme/unsigned", "acme/foreign"):
        refused = load(kforge_hub, tmp_path, repo, trust_file)
        assert refused.returncode != 0, refused.stdout
        assert "SignatureError" in refused.stderr, refused.stderr
        assert "loaded" not in refused.stdout


def test_push_to_a_case_variant_of_an_existing_repo_is_refused(kforge_hub, tmp_path):
    """The hub holds `acme/Relu`; pushing to `acme/relu` used to pass the create step (409 = exists) and then
    fail with a bare RepoNotFound on the first branch request."""
    token = kforge_hub.token("alice", orgs=["acme"])
    hub_env = kforge_hub.env(token)
    run_kforge("push", make_project(tmp_path / "a", "_case_a"), "--repo", "acme/Relu", env=hub_env)
    done = subprocess.run(
        [str(kforge_bin()), "push", make_project(tmp_path / "b", "_case_b"), "--repo", "acme/relu"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **hub_env},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "differ from the existing `acme/Relu` only in letter case" in done.stderr
    assert "RepoNotFound" not in done.stderr and "not found" not in done.stderr.lower()
