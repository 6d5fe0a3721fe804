"""Lock files: every format read, errors named, hashes checked against files on disk (git's own blob ids)."""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys

import pytest
from kernel_trees import make_variant
from kforge.errors import LockError
from kforge.locking import (
    KERNELS,
    KFORGE,
    Lock,
    LockEntry,
    check_locked_variant,
    local_variant_hash,
    parse_lock,
    project_dependencies,
    read_lock,
)

C1, C2 = "a" * 40, "b" * 40


def test_reads_kernels_017_kforge_and_016_formats():
    v017 = [
        {"dependency": {"repo-id": "org/a", "version": 1}, "lock": {"commit": C1}},
        {"dependency": {"repo-id": "org/b", "revision": "main"}, "lock": {"commit": C2}},
    ]
    lock = parse_lock(json.dumps(v017), "k.lock")
    assert [(e.repo_id, e.version, e.revision, e.commit, e.variants) for e in lock.entries] == [
        ("org/a", 1, None, C1, None),
        ("org/b", None, "main", C2, None),
    ]
    hashed = [{**v017[0], "variants": {"torch-cpu": {"hash": "sha256-00", "hash_type": "metadata_sha256"}}}]
    assert parse_lock(json.dumps(hashed), "k.lock").find("org/a").variants["torch-cpu"]["hash"] == "sha256-00"
    v016 = [
        {
            "repo_id": "org/a",
            "sha": C1,
            "variants": {"torch-cpu": {"hash": "sha256-11", "hash_type": "git_lfs_concat"}},
        }
    ]
    e = parse_lock(json.dumps(v016), "k.lock").find("org/a")
    assert (e.commit, e.version, e.variants["torch-cpu"]["hash_type"]) == (C1, None, "git_lfs_concat")


def test_written_formats_round_trip_and_kernels_reads_the_bare_one():
    from kernels._rust import KernelLocks

    entry = LockEntry(
        "org/a", C1, 1, None, {"torch-cpu": {"hash": "sha256-ab", "hash_type": "metadata_sha256"}}
    )
    assert parse_lock(json.dumps([entry.to_json(KFORGE)]), "x").entries == [entry]
    bare = json.dumps([entry.to_json(KERNELS)])
    assert "variants" not in bare
    assert [k.repo_id for k in KernelLocks.from_json(bare).keys()] == ["org/a"]
    with pytest.raises(ValueError, match="unknown field `variants`"):  # why --format kernels exists
        KernelLocks.from_json(json.dumps([entry.to_json(KFORGE)]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "k.lock: not valid JSON"),
        ("{}", "expected a JSON list of locked kernels, got dict"),
        ('[{"x": 1}]', "entry 0: neither a kernels 0.17 entry"),
        (
            json.dumps([{"dependency": {"repo-id": "o/a", "version": 1}, "lock": {"commit": "main"}}]),
            r"entry 0 \(o/a\): commit must be 40 or 64 lowercase hex, got 'main'",
        ),
        (
            json.dumps(
                [{"dependency": {"repo-id": "o/a", "version": 1}, "lock": {"commit": C1}, "extra": 1}]
            ),
            r"entry 0: unknown keys \['extra'\]",
        ),
        (
            json.dumps([{"dependency": {"repo-id": "o/a", "version": 1}, "lock": {"commit": C1}}] * 2),
            "entry 1: o/a is locked twice",
        ),
        (
            json.dumps([{"repo_id": "o/a", "sha": C1, "variants": {"v": {"hash": "md5-x"}}}]),
            r"variants\['v'\] must be \{'hash': 'sha256-<hex>'",
        ),
    ],
)
def test_bad_lock_files_name_the_problem(text, message):
    with pytest.raises(LockError, match=message):
        parse_lock(text, "k.lock")


def test_missing_entry_and_missing_file(tmp_path):
    lock = parse_lock("[]", "k.lock")
    with pytest.raises(
        LockError, match=r"k.lock: no entry for org/x; add it to \[tool.kernels.dependencies\]"
    ):
        lock.find("org/x")
    with pytest.raises(LockError, match="cannot read lock file .*create it with `kforge lock"):
        read_lock(tmp_path / "absent.lock")


def _git_blob(path) -> bytes:
    out = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    return bytes.fromhex(out.stdout.strip())


def test_variant_hashes_match_git_and_detect_changes(tmp_path):
    d = make_variant(
        tmp_path / "torch-cpu",
        {"__init__.py": "X = 1\n", "sub/ops.py": "Y = 2\n"},
        name="relu",
        id_="_relu_cpu_0000000",
    )
    # git_lfs_concat (kernels <= 0.16), checked against git's own blob ids
    pairs = sorted(
        (rel.encode(), _git_blob(d / rel)) for rel in ("__init__.py", "metadata.json", "sub/ops.py")
    )
    m = hashlib.sha256()
    for path, blob in pairs:
        m.update(path + blob)
    assert local_variant_hash(d, "git_lfs_concat") == f"sha256-{m.hexdigest()}"
    md_hash = "sha256-" + hashlib.sha256((d / "metadata.json").read_bytes()).hexdigest()
    assert local_variant_hash(d, "metadata_sha256") == md_hash

    lock = Lock(source="app/kernels.lock")
    entry = LockEntry(
        "org/relu", C1, 1, None, {"torch-cpu": {"hash": md_hash, "hash_type": "metadata_sha256"}}
    )
    check_locked_variant(lock, entry, d)
    (d / "metadata.json").write_text(
        (d / "metadata.json").read_text().replace('"version": 1', '"version": 2')
    )
    with pytest.raises(
        LockError, match=r"content hash sha256-\w+ differs from .* org/relu variant torch-cpu"
    ):
        check_locked_variant(lock, entry, d)
    other = make_variant(tmp_path / "torch-cuda", {"__init__.py": ""}, name="relu", id_="_relu_cuda_0000000")
    with pytest.raises(LockError, match=r"has no hash for variant torch-cuda \(locked: torch-cpu\)"):
        check_locked_variant(lock, entry, other)
    check_locked_variant(lock, LockEntry("org/relu", C1, 1), other)  # a bare 0.17 lock pins the commit only


def test_lockfile_none_reads_the_callers_distribution(tmp_path, monkeypatch):
    site = tmp_path / "site"
    pkg, dist = site / "lockuser", site / "lockuser-1.0.dist-info"
    pkg.mkdir(parents=True)
    dist.mkdir()
    (pkg / "__init__.py").write_text(
        "from kforge.locking import read_lock\n\ndef my_lock():\n    return read_lock(None)\n"
    )
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lockuser\nVersion: 1.0\n")
    (dist / "top_level.txt").write_text("lockuser\n")
    (dist / "RECORD").write_text("lockuser/__init__.py,,\n")
    entry = {"dependency": {"repo-id": "org/relu", "version": 1}, "lock": {"commit": C1}}
    (dist / "kernels.lock").write_text(json.dumps([entry]))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    import lockuser

    try:
        lock = lockuser.my_lock()
    finally:
        sys.modules.pop("lockuser", None)
    assert lock.source == "kernels.lock of distribution lockuser" and lock.find("org/relu").commit == C1


def test_pyproject_dependencies(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"org/a" = 1\n"org/b" = 3\n')
    assert project_dependencies(tmp_path) == {"org/a": 1, "org/b": 3}
    (tmp_path / "pyproject.toml").write_text("[tool.kernels.dependencies]\nnoslash = 1\n")
    with pytest.raises(LockError, match="key 'noslash' must be a repo id 'org/name'"):
        project_dependencies(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.kernels.dependencies\n")
    with pytest.raises(LockError, match="pyproject.toml: not valid TOML"):
        project_dependencies(tmp_path)
