"""The genuine huggingface_hub client (2.x) against a real `kforge hub serve` on 127.0.0.1.

Every call goes over HTTP to the Rust server; nothing is mocked. Both repo types the hub serves are covered.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import (
    CommitOperationAdd,
    HfApi,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import (
    BadRequestError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

REPO_TYPES = ["model", "kernel"]


def make_folder(root: Path) -> dict[str, bytes]:
    """A small project: README with front matter, nested files, a binary file."""
    files = {
        "README.md": b"---\nlicense: apache-2.0\n---\n# tiny\n",
        "config.json": b'{"a": 1}\n',
        "sub/deep/weights.bin": bytes(range(256)) * 64,
        "sub/notes.txt": "h\u00e9llo\n".encode(),
        "empty.txt": b"",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


@pytest.fixture
def alice(kforge_hub):
    return HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("alice", orgs=["acme"]))


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "hf-cache"


@pytest.mark.parametrize("repo_type", REPO_TYPES)
def test_upload_list_download_roundtrip(kforge_hub, alice, cache, tmp_path, repo_type):
    repo_id = "acme/tiny"
    url = alice.create_repo(repo_id, repo_type=repo_type)
    assert url.repo_id == repo_id
    assert url.endpoint == kforge_hub.url
    # exist_ok reads `url` from the 409 body; without it the conflict surfaces.
    assert alice.create_repo(repo_id, repo_type=repo_type, exist_ok=True).repo_id == repo_id
    with pytest.raises(HfHubHTTPError) as exc:
        alice.create_repo(repo_id, repo_type=repo_type)
    assert exc.value.response.status_code == 409

    files = make_folder(tmp_path / "src")
    info = alice.upload_folder(repo_id=repo_id, repo_type=repo_type, folder_path=tmp_path / "src")
    assert len(info.oid) == 40
    alice.upload_file(
        path_or_fileobj=b"extra bytes", path_in_repo="extra.txt", repo_id=repo_id, repo_type=repo_type
    )
    files["extra.txt"] = b"extra bytes"

    assert sorted(alice.list_repo_files(repo_id, repo_type=repo_type)) == sorted(files)
    entries = {e.path: e for e in alice.list_repo_tree(repo_id, repo_type=repo_type, path_in_repo="sub")}
    assert set(entries) == {"sub/deep", "sub/notes.txt"}
    assert entries["sub/notes.txt"].size == len(files["sub/notes.txt"])
    # `oid` is the git blob id, which the client uses to skip unchanged files.
    data = files["sub/notes.txt"]
    assert entries["sub/notes.txt"].blob_id == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    refs = alice.list_repo_refs(repo_id, repo_type=repo_type)
    main = {b.name: b.target_commit for b in refs.branches}["main"]
    info = alice.repo_info(repo_id, repo_type=repo_type, files_metadata=True)
    assert info.sha == main
    if repo_type == "model":
        # files_metadata=True asks for sizes (`blobs=true`).
        assert {s.rfilename: s.size for s in info.siblings} == {p: len(b) for p, b in files.items()}
    else:
        # kernel_info sends no query and keeps siblings as the raw JSON dicts.
        assert {s["rfilename"] for s in info.siblings} == set(files)
    assert info.private is False
    assert info.last_modified is not None

    for rel, data in files.items():
        local = hf_hub_download(repo_id, rel, repo_type=repo_type, cache_dir=cache, endpoint=kforge_hub.url)
        assert Path(local).read_bytes() == data
        # The snapshot folder is named by X-Repo-Commit.
        assert main in local

    snap = Path(
        snapshot_download(
            repo_id,
            repo_type=repo_type,
            cache_dir=tmp_path / "snap-cache",
            allow_patterns=["sub/*"],
            endpoint=kforge_hub.url,
        )
    )
    got = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file())
    assert got == ["sub/deep/weights.bin", "sub/notes.txt"]
    assert (snap / "sub/deep/weights.bin").read_bytes() == files["sub/deep/weights.bin"]


@pytest.mark.parametrize("repo_type", REPO_TYPES)
def test_branches_tags_and_revisions(kforge_hub, alice, cache, repo_type):
    repo_id = "acme/refs"
    alice.create_repo(repo_id, repo_type=repo_type)
    first = alice.upload_file(
        path_or_fileobj=b"one", path_in_repo="f.txt", repo_id=repo_id, repo_type=repo_type
    )
    alice.create_tag(repo_id, tag="v1.0", repo_type=repo_type)
    alice.create_branch(repo_id, branch="v1", repo_type=repo_type)
    alice.upload_file(path_or_fileobj=b"two", path_in_repo="f.txt", repo_id=repo_id, repo_type=repo_type)
    alice.upload_file(
        path_or_fileobj=b"dev", path_in_repo="f.txt", repo_id=repo_id, repo_type=repo_type, revision="v1"
    )

    refs = alice.list_repo_refs(repo_id, repo_type=repo_type)
    branches = {b.name: b.target_commit for b in refs.branches}
    tags = {t.name: t.target_commit for t in refs.tags}
    assert set(branches) == {"main", "v1"}
    assert tags == {"v1.0": first.oid}
    assert refs.converts == []

    def read(revision: str) -> bytes:
        path = hf_hub_download(
            repo_id, "f.txt", repo_type=repo_type, revision=revision, cache_dir=cache, endpoint=kforge_hub.url
        )
        return Path(path).read_bytes()

    assert read("main") == b"two"
    assert read("v1") == b"dev"
    assert read("v1.0") == b"one"
    assert read(first.oid) == b"one"
    assert alice.repo_info(repo_id, repo_type=repo_type, revision="v1").sha == branches["v1"]

    with pytest.raises(HfHubHTTPError) as exc:
        alice.create_branch(repo_id, branch="v1", repo_type=repo_type)
    assert exc.value.response.status_code == 409
    alice.create_branch(repo_id, branch="v1", repo_type=repo_type, exist_ok=True)
    alice.delete_tag(repo_id, tag="v1.0", repo_type=repo_type)
    alice.delete_branch(repo_id, branch="v1", repo_type=repo_type)
    refs = alice.list_repo_refs(repo_id, repo_type=repo_type)
    assert [b.name for b in refs.branches] == ["main"] and refs.tags == []


@pytest.mark.parametrize("repo_type", REPO_TYPES)
def test_error_classes(kforge_hub, alice, cache, repo_type):
    repo_id = "acme/errors"
    alice.create_repo(repo_id, repo_type=repo_type)
    alice.upload_file(path_or_fileobj=b"x", path_in_repo="a.txt", repo_id=repo_id, repo_type=repo_type)
    kw = {"repo_type": repo_type, "cache_dir": cache, "endpoint": kforge_hub.url}
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(repo_id, "missing.txt", **kw)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(repo_id, "a.txt", revision="no-such-branch", **kw)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("acme/no-such-repo", "a.txt", **kw)
    with pytest.raises(RepositoryNotFoundError):
        alice.repo_info("acme/no-such-repo", repo_type=repo_type)
    with pytest.raises(RevisionNotFoundError):
        alice.list_repo_files(repo_id, repo_type=repo_type, revision="nope")
    assert alice.file_exists(repo_id, "a.txt", repo_type=repo_type)
    assert not alice.file_exists(repo_id, "b.txt", repo_type=repo_type)
    assert alice.repo_exists(repo_id, repo_type=repo_type)
    assert not alice.repo_exists("acme/nothing", repo_type=repo_type)
    # A malformed README front matter is refused before anything is uploaded.
    with pytest.raises(ValueError, match="no closing"):
        alice.upload_file(
            path_or_fileobj=b"---\nlicense: x\n",
            path_in_repo="README.md",
            repo_id=repo_id,
            repo_type=repo_type,
        )


def test_deletes_and_parent_commit_conflict(alice):
    repo_id = "acme/ops"
    alice.create_repo(repo_id, repo_type="kernel")
    base = alice.create_commit(
        repo_id,
        [CommitOperationAdd(f"build/v/{n}.py", f"# {n}\n".encode()) for n in "abc"]
        + [CommitOperationAdd("keep.txt", b"k")],
        commit_message="add",
        repo_type="kernel",
    )
    alice.delete_file("build/v/a.py", repo_id, repo_type="kernel")
    assert sorted(alice.list_repo_files(repo_id, repo_type="kernel")) == [
        "build/v/b.py",
        "build/v/c.py",
        "keep.txt",
    ]
    alice.delete_folder("build", repo_id, repo_type="kernel")
    assert alice.list_repo_files(repo_id, repo_type="kernel") == ["keep.txt"]
    with pytest.raises(RemoteEntryNotFoundError):
        alice.delete_file("nope.txt", repo_id, repo_type="kernel")
    # Optimistic locking: a stale parent commit is refused with 412 and changes nothing.
    head = alice.repo_info(repo_id, repo_type="kernel").sha
    with pytest.raises(HfHubHTTPError) as exc:
        alice.create_commit(
            repo_id,
            [CommitOperationAdd("late.txt", b"late")],
            commit_message="stale",
            repo_type="kernel",
            parent_commit=base.oid,
        )
    assert exc.value.response.status_code == 412
    assert alice.repo_info(repo_id, repo_type="kernel").sha == head
    ok = alice.create_commit(
        repo_id,
        [CommitOperationAdd("fresh.txt", b"f")],
        commit_message="fresh",
        repo_type="kernel",
        parent_commit=head,
    )
    assert ok.oid != head
    assert ok.commit_url.startswith(alice.endpoint + "/kernels/acme/ops/commit/")
    log = alice.list_repo_commits(repo_id, repo_type="kernel")
    assert [c.title for c in log[:2]] == ["fresh", "Delete folder build with huggingface_hub"]


def test_private_repos_and_permissions(kforge_hub, alice, cache):
    alice.create_repo("acme/secret", repo_type="kernel", private=True)
    alice.upload_file(path_or_fileobj=b"s", path_in_repo="s.txt", repo_id="acme/secret", repo_type="kernel")
    assert alice.repo_info("acme/secret", repo_type="kernel").private is True

    outsider = HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("bob"))
    anonymous = HfApi(endpoint=kforge_hub.url, token=False)
    for api in (outsider, anonymous):
        # Private repos are indistinguishable from missing ones for non-members.
        with pytest.raises(RepositoryNotFoundError):
            api.repo_info("acme/secret", repo_type="kernel")
        with pytest.raises(RepositoryNotFoundError):
            api.list_repo_refs("acme/secret", repo_type="kernel")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            "acme/secret", "s.txt", repo_type="kernel", cache_dir=cache, endpoint=kforge_hub.url, token=False
        )

    # Writing needs a write token that belongs to the namespace.
    alice.create_repo("acme/public", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as exc:
        outsider.upload_file(
            path_or_fileobj=b"x", path_in_repo="x", repo_id="acme/public", repo_type="kernel"
        )
    assert exc.value.response.status_code == 403
    reader = HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("carol", write=False, orgs=["acme"]))
    assert reader.repo_info("acme/secret", repo_type="kernel").private is True
    with pytest.raises(HfHubHTTPError) as exc:
        reader.create_repo("acme/other", repo_type="kernel")
    assert exc.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as exc:
        anonymous.create_repo("acme/other", repo_type="kernel")
    assert exc.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi(endpoint=kforge_hub.url, token="hf_forged").repo_info("acme/public", repo_type="kernel")
    assert exc.value.response.status_code == 401

    # Visibility can be changed by a writer; the repo then becomes readable by everyone.
    # (the client's update_repo_settings knows no kernel type, so this uses a model repo)
    alice.create_repo("acme/secret-model", private=True)
    with pytest.raises(RepositoryNotFoundError):
        anonymous.repo_info("acme/secret-model")
    alice.update_repo_settings("acme/secret-model", private=False)
    assert anonymous.repo_info("acme/secret-model").private is False

    alice.delete_repo("acme/public", repo_type="kernel")
    with pytest.raises(RepositoryNotFoundError):
        alice.repo_info("acme/public", repo_type="kernel")
    alice.delete_repo("acme/public", repo_type="kernel", missing_ok=True)


def test_bad_paths_are_refused(alice):
    alice.create_repo("acme/paths", repo_type="model")
    for bad in ["../escape.txt", "a/../../b", ".git/config", "a\\b"]:
        with pytest.raises((BadRequestError, HfHubHTTPError, ValueError)):
            alice.create_commit(
                "acme/paths",
                [CommitOperationAdd(bad, b"x")],
                commit_message="bad",
            )
    assert alice.list_repo_files("acme/paths") == []


def test_deleting_a_missing_repo_is_repo_not_found(alice):
    with pytest.raises(RepositoryNotFoundError):
        alice.delete_repo("acme/ghost", repo_type="kernel")


def test_organization_overview_reports_trust(kforge_hub, alice):
    org = alice.get_organization_overview("acme")
    assert org.name == "acme"
    assert org.trustedKernelPublisher is False
    kforge_hub.trust("acme")
    assert alice.get_organization_overview("acme").trustedKernelPublisher is True
    with pytest.raises(HfHubHTTPError) as exc:
        alice.get_organization_overview("nobody")
    assert exc.value.response.status_code == 404


def test_local_dir_downloads_and_ranged_reads(kforge_hub, alice, tmp_path):
    from huggingface_hub import HfFileSystem

    data = bytes(range(256)) * 1000
    alice.create_repo("acme/fs")
    alice.upload_file(path_or_fileobj=data, path_in_repo="dir/blob.bin", repo_id="acme/fs")
    local = tmp_path / "local"
    path = hf_hub_download("acme/fs", "dir/blob.bin", local_dir=local, endpoint=kforge_hub.url)
    assert Path(path) == local / "dir/blob.bin"
    assert Path(path).read_bytes() == data
    # A second call finds the file by its sha256 etag and does not download again.
    before = Path(path).stat().st_mtime_ns
    hf_hub_download("acme/fs", "dir/blob.bin", local_dir=local, endpoint=kforge_hub.url)
    assert Path(path).stat().st_mtime_ns == before

    fs = HfFileSystem(endpoint=kforge_hub.url, token=alice.token)
    assert fs.ls("acme/fs/dir", detail=False) == ["acme/fs/dir/blob.bin"]
    with fs.open("acme/fs/dir/blob.bin", "rb", block_size=4096) as f:
        f.seek(1000)
        assert f.read(300) == data[1000:1300]


def test_hf_file_system(kforge_hub, alice):
    """fsspec's `HfFileSystem` (tree, paths-info, ranged resolve, commits) works against the hub unchanged."""
    from huggingface_hub import HfFileSystem

    alice.create_repo("acme/fs")
    alice.upload_file(path_or_fileobj=b"hello world", path_in_repo="d/a.txt", repo_id="acme/fs")
    fs = HfFileSystem(endpoint=kforge_hub.url, token=alice.token)
    assert fs.ls("acme/fs", detail=False) == ["acme/fs/d"]
    [entry] = fs.ls("acme/fs/d", detail=True)
    assert (entry["name"], entry["size"], entry["type"]) == ("acme/fs/d/a.txt", 11, "file")
    assert entry["blob_id"] == hashlib.sha1(b"blob 11\0hello world").hexdigest()
    with fs.open("acme/fs/d/a.txt", "rb") as f:
        f.seek(6)
        assert f.read(5) == b"world"
    assert fs.glob("acme/fs/**/*.txt") == ["acme/fs/d/a.txt"]
    assert fs.isdir("acme/fs/d") and not fs.exists("acme/fs/nope")
    with fs.open("acme/fs/new.txt", "wb") as f:
        f.write(b"written via fs")
    assert fs.cat("acme/fs/new.txt") == b"written via fs"
    fs.rm("acme/fs/new.txt")
    assert sorted(alice.list_repo_files("acme/fs")) == ["d/a.txt"]


def test_hf_cli(kforge_hub, alice, tmp_path: Path):
    """The `hf` command line of huggingface_hub, pointed at the hub with HF_ENDPOINT / HF_TOKEN."""
    env = {
        **os.environ,
        "HF_ENDPOINT": kforge_hub.url,
        "HF_TOKEN": alice.token,
        "HF_HOME": str(tmp_path / "home"),
    }
    hf = str(Path(sys.executable).parent / "hf")
    files = make_folder(tmp_path / "up")

    def run(*args: str) -> str:
        done = subprocess.run([hf, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
        return done.stdout

    assert "user: alice" in run("auth", "whoami")
    run("repos", "create", "acme/cli")
    run("upload", "acme/cli", str(tmp_path / "up"), ".")
    run("repos", "branch", "create", "acme/cli", "v1")
    run("repos", "tag", "create", "acme/cli", "t1")
    run("download", "acme/cli", "--revision", "v1", "--local-dir", str(tmp_path / "down"))
    for rel, data in files.items():
        assert (tmp_path / "down" / rel).read_bytes() == data, rel
    refs = alice.list_repo_refs("acme/cli")
    assert {b.name for b in refs.branches} == {"main", "v1"} and [t.name for t in refs.tags] == ["t1"]
    run("repos", "delete", "acme/cli", "--yes")
    assert alice.repo_exists("acme/cli") is False


def test_tree_and_paths_info_expand_give_last_commits(alice):
    repo = "acme/expand"
    alice.create_repo(repo)

    def put(path: str, data: bytes) -> str:
        return alice.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo).oid

    first = put("a.txt", b"a")
    put("d/x.txt", b"x1")
    second = put("d/x.txt", b"x2")
    third = put("b.txt", b"b")
    expected = {"a.txt": first, "b.txt": third, "d": second, "d/x.txt": second}
    listed = {e.path: e.last_commit for e in alice.list_repo_tree(repo, recursive=True, expand=True)}
    assert {p: c.oid for p, c in listed.items()} == expected
    assert listed["b.txt"].title == "Upload b.txt with huggingface_hub" and listed["b.txt"].date is not None
    infos = alice.get_paths_info(repo, ["d", "a.txt"], expand=True)
    assert {i.path: i.last_commit.oid for i in infos} == {"d": second, "a.txt": first}
    # Without expand nothing is walked or added.
    assert all(e.last_commit is None for e in alice.list_repo_tree(repo, recursive=True))
    # At an older revision the walk starts there.
    old = {e.path: e.last_commit.oid for e in alice.list_repo_tree(repo, revision=first, expand=True)}
    assert old == {"a.txt": first}
