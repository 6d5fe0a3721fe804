"""Edge cases of the genuine huggingface_hub client (2.x) against `kforge hub serve`: unsupported repo
types, ranged reads at the edges, ref-name collisions, settings the hub cannot honour, hostile paths."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import (
    BadRequestError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes


def raw_get(url: str, headers: dict[str, str] | None = None) -> Raw:
    """A plain GET (stdlib), for requests the client never builds itself."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Raw(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as e:
        return Raw(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


@pytest.fixture
def alice(kforge_hub):
    return HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("alice", orgs=["acme"]))


def test_unsupported_repo_types_do_not_exist(kforge_hub, alice, tmp_path: Path):
    alice.create_repo("acme/m")
    alice.upload_file(path_or_fileobj=b"x", path_in_repo="a.txt", repo_id="acme/m")
    # The model exists; a dataset or space of the same id does not. Before, the code-less 404 made
    # repo_exists/file_exists raise and hf_hub_download report a connection problem.
    assert alice.repo_exists("acme/m")
    assert alice.repo_exists("acme/m", repo_type="dataset") is False
    assert alice.repo_exists("acme/m", repo_type="space") is False
    assert alice.file_exists("acme/m", "a.txt", repo_type="dataset") is False
    assert alice.repo_exists("no-namespace") is False
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            "acme/m", "a.txt", repo_type="dataset", cache_dir=tmp_path / "c", endpoint=kforge_hub.url
        )
    with pytest.raises(RepositoryNotFoundError):
        alice.list_repo_files("acme/m", repo_type="dataset")


def test_ranges_at_the_edges(kforge_hub, alice):
    data = bytes(range(256)) * 4
    alice.create_repo("acme/r")
    alice.upload_file(path_or_fileobj=data, path_in_repo="b.bin", repo_id="acme/r")
    url = f"{kforge_hub.url}/acme/r/resolve/main/b.bin"

    def get(spec: str) -> Raw:
        return raw_get(url, {"Range": spec})

    r = get("bytes=1000-99999999999999999999999")
    assert (r.status, r.headers["content-range"], r.body) == (206, "bytes 1000-1023/1024", data[1000:])
    r = get("bytes=-99999999999999999999999")
    assert (r.status, r.body) == (206, data)
    r = get("bytes=99999999999999999999999-")
    assert (r.status, r.headers["content-range"]) == (416, "bytes */1024")
    r = get("bytes=-5-")
    assert (r.status, r.body) == (200, data)


def test_tag_and_branch_names_cannot_shadow_each_other(alice):
    alice.create_repo("acme/refs", repo_type="kernel")
    one = alice.upload_file(path_or_fileobj=b"1", path_in_repo="f", repo_id="acme/refs", repo_type="kernel")
    alice.create_branch("acme/refs", branch="v1", repo_type="kernel")
    alice.upload_file(path_or_fileobj=b"2", path_in_repo="f", repo_id="acme/refs", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as exc:
        alice.create_tag("acme/refs", tag="v1", repo_type="kernel")
    assert exc.value.response.status_code == 409
    assert "ambiguous" in str(exc.value)
    alice.create_tag("acme/refs", tag="v1.0", revision=one.oid, repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as exc:
        alice.create_branch("acme/refs", branch="v1.0", repo_type="kernel")
    assert exc.value.response.status_code == 409
    refs = alice.list_repo_refs("acme/refs", repo_type="kernel")
    assert sorted(b.name for b in refs.branches) == ["main", "v1"]
    assert {t.name: t.target_commit for t in refs.tags} == {"v1.0": one.oid}


def test_gating_is_refused_not_silently_ignored(kforge_hub, alice):
    alice.create_repo("acme/g")
    with pytest.raises(BadRequestError, match="gated repos are not supported"):
        alice.update_repo_settings("acme/g", gated="auto")
    alice.update_repo_settings("acme/g", gated=False)
    assert HfApi(endpoint=kforge_hub.url, token=False).repo_info("acme/g").private is False


def test_nested_git_dirs_and_bad_headers_are_refused(kforge_hub, alice):
    alice.create_repo("acme/p")
    # The client itself refuses an exact `.git` component; the hub also refuses case variants.
    for bad in ["sub/.Git/config", "a/.GIT/hooks/post-checkout"]:
        with pytest.raises(BadRequestError, match="`.git` component"):
            alice.create_commit("acme/p", [CommitOperationAdd(bad, b"x")], commit_message="bad")
    assert alice.list_repo_files("acme/p") == []
    # A cursor past the end of a listing is a 400 with a message, never a 500.
    r = raw_get(f"{kforge_hub.url}/api/models/acme/p/tree/main?cursor=18446744073709551615")
    assert r.status == 400
    assert r.headers["x-error-code"] == "BadRequest"
    assert "past the end" in json.loads(r.body)["error"]


def test_commit_history_pages_are_followed_by_the_client(kforge_hub, alice):
    from huggingface_hub.utils._pagination import paginate

    alice.create_repo("acme/log")
    for i in range(3):
        alice.upload_file(path_or_fileobj=str(i).encode(), path_in_repo="f", repo_id="acme/log")
    expected = ["Upload f with huggingface_hub"] * 3 + ["initial commit"]
    assert [c.title for c in alice.list_repo_commits("acme/log")] == expected
    # Small pages through the client's own Link-following pager: nothing is lost or repeated.
    items = list(
        paginate(f"{kforge_hub.url}/api/models/acme/log/commits/main?limit=3", params={}, headers={})
    )
    assert [c["title"] for c in items] == expected
    assert len({c["id"] for c in items}) == 4


def test_move_repo_renames_and_transfers(kforge_hub, alice, tmp_path: Path):
    """`HfApi.move_repo`: history, branches and files follow the repo; the old name is gone; rights on both
    namespaces are needed and an existing target is never overwritten."""
    alice.create_repo("acme/old", repo_type="kernel", private=True)
    first = alice.upload_file(
        path_or_fileobj=b"v1", path_in_repo="a.txt", repo_id="acme/old", repo_type="kernel"
    )
    alice.create_branch("acme/old", branch="v1", repo_type="kernel")
    alice.create_repo("acme/taken", repo_type="kernel")

    with pytest.raises(HfHubHTTPError) as ei:
        alice.move_repo("acme/old", "acme/taken", repo_type="kernel")
    assert ei.value.response.status_code == 409
    bob = HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("bob", orgs=["bobs"]))
    with pytest.raises(RepositoryNotFoundError):  # bob cannot even see the private repo
        bob.move_repo("acme/old", "bobs/stolen", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as ei:  # alice may not write to bob's organisation
        alice.move_repo("acme/old", "bobs/gift", repo_type="kernel")
    assert ei.value.response.status_code == 403 and "cannot write to namespace `bobs`" in str(ei.value)
    with pytest.raises(BadRequestError, match="repository name"):
        alice.move_repo("acme/old", "acme/bad name", repo_type="kernel")
    for body, expected in [
        ({"fromRepo": "acme/old", "toRepo": "acme/a/b", "type": "kernel"}, "expected `namespace/name`"),
        ({"fromRepo": "acme/old", "type": "kernel"}, "lacks `toRepo`"),
        (
            {"fromRepo": "acme/old", "toRepo": "kernels/x", "type": "kernel"},
            "namespace `kernels` is reserved",
        ),
    ]:
        req = urllib.request.Request(
            f"{kforge_hub.url}/api/repos/move",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {alice.token}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as raw:
            urllib.request.urlopen(req, timeout=30)
        assert raw.value.code == 400 and expected in raw.value.read().decode(), body
    assert alice.list_repo_files("acme/old", repo_type="kernel") == ["a.txt"]

    alice.move_repo("acme/old", "acme/new", repo_type="kernel")
    assert alice.repo_exists("acme/old", repo_type="kernel") is False
    info = alice.repo_info("acme/new", repo_type="kernel")
    assert info.private is True and info.sha == first.oid
    refs = alice.list_repo_refs("acme/new", repo_type="kernel")
    assert sorted(b.name for b in refs.branches) == ["main", "v1"]
    got = hf_hub_download(
        "acme/new",
        "a.txt",
        repo_type="kernel",
        revision="v1",
        cache_dir=tmp_path / "c",
        endpoint=kforge_hub.url,
        token=alice.token,
    )
    assert Path(got).read_bytes() == b"v1"
    # The old name is free again, and the moved repo keeps working under its new one.
    alice.create_repo("acme/old", repo_type="kernel")
    assert alice.list_repo_files("acme/old", repo_type="kernel") == []
    alice.upload_file(path_or_fileobj=b"v2", path_in_repo="a.txt", repo_id="acme/new", repo_type="kernel")
    assert [c.title for c in alice.list_repo_commits("acme/new", repo_type="kernel")][:2] == [
        "Upload a.txt with huggingface_hub",
        "Upload a.txt with huggingface_hub",
    ]


def test_names_differing_only_in_case_cannot_coexist(alice):
    alice.create_repo("acme/Relu", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as ei:
        alice.create_repo("acme/relu", repo_type="kernel")
    assert ei.value.response.status_code == 409
    assert "differ from the existing `acme/Relu` only in letter case" in str(ei.value)
    # exist_ok hands back the existing repo's URL, so the caller learns the name to use.
    assert alice.create_repo("acme/RELU", repo_type="kernel", exist_ok=True).repo_id == "acme/Relu"
    alice.create_repo("acme/other", repo_type="kernel")
    with pytest.raises(HfHubHTTPError, match="only in letter case"):
        alice.move_repo("acme/other", "acme/relu", repo_type="kernel")
    alice.move_repo("acme/Relu", "acme/relu", repo_type="kernel")  # a repo may change its own name's case
    assert alice.repo_exists("acme/relu", repo_type="kernel") and not alice.repo_exists(
        "acme/Relu", repo_type="kernel"
    )
    # The model repo type is its own name space, as on the Hub.
    alice.create_repo("acme/RELU")


def test_super_squash_history(alice, tmp_path: Path):
    repo = "acme/squash"
    alice.create_repo(repo)

    def put(data: bytes, path: str = "a.txt"):
        return alice.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo)

    put(b"one")
    second = put(b"two").oid
    alice.create_branch(repo, branch="v1", revision=second)
    put(b"three")
    third = put(b"b", "b.txt").oid

    alice.super_squash_history(repo, commit_message="Squashed")
    history = alice.list_repo_commits(repo)
    assert [c.title for c in history] == ["Squashed"]
    assert alice.repo_info(repo).sha == history[0].commit_id
    assert sorted(alice.list_repo_files(repo)) == ["a.txt", "b.txt"]
    with open(
        hf_hub_download(repo, "a.txt", endpoint=alice.endpoint, token=alice.token, cache_dir=tmp_path)
    ) as f:
        assert f.read() == "three"
    # The old head reached only from main is gone; v1 keeps its history.
    with pytest.raises(RevisionNotFoundError):
        alice.repo_info(repo, revision=third)
    assert [c.commit_id for c in alice.list_repo_commits(repo, revision="v1")][0] == second
    assert len(alice.list_repo_commits(repo, revision="v1")) == 3  # initial, one, two
    with pytest.raises(HfHubHTTPError) as ei:
        alice.super_squash_history(repo, branch="nope")
    assert ei.value.response.status_code == 404


def test_list_models_and_kernels(kforge_hub, alice):
    """`HfApi.list_models` (and `GET /api/kernels`): readable repos only, author/search narrowing, sorting,
    pages joined by `Link` headers; filters on metadata the hub does not keep are refused."""
    for repo, kind, private in [
        ("acme/list-a", "model", False),
        ("acme/list-b", "model", True),
        ("acme/list-k", "kernel", False),
    ]:
        alice.create_repo(repo, repo_type=kind, private=private)
    bob = HfApi(endpoint=kforge_hub.url, token=kforge_hub.token("bob", orgs=["bobs"]))
    bob.create_repo("bobs/list-c")

    assert [m.id for m in alice.list_models(author="acme", search="list-")] == ["acme/list-a", "acme/list-b"]
    assert [m.id for m in bob.list_models(search="LIST-")] == ["acme/list-a", "bobs/list-c"]  # b is private
    newest = [m.id for m in alice.list_models(search="list-", sort="created_at")]
    assert newest == ["bobs/list-c", "acme/list-b", "acme/list-a"]
    time.sleep(1.1)  # commit times have one-second resolution
    alice.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="acme/list-b")
    assert [m.id for m in alice.list_models(search="list-", sort="last_modified")][0] == "acme/list-b"
    info = next(iter(alice.list_models(author="ACME", search="list-a")))
    assert info.private is False and info.sha == alice.repo_info("acme/list-a").sha
    with pytest.raises(BadRequestError, match="keeps no tags"):
        list(alice.list_models(filter="text-generation"))
    assert list(alice.list_models(gated=True)) == []
    assert list(alice.list_datasets()) == []

    # Pages of one, followed through the absolute Link header as the client does.
    url, seen = f"{kforge_hub.url}/api/kernels?search=list-&limit=1", []
    bob.create_repo("bobs/list-k2", repo_type="kernel")
    while url:
        page = raw_get(url)
        assert page.status == 200
        seen += [item["id"] for item in json.loads(page.body)]
        link = page.headers.get("link", "")
        url = link[1 : link.index(">")] if 'rel="next"' in link else None
        assert url is None or url.startswith(kforge_hub.url)
    assert seen == ["acme/list-k", "bobs/list-k2"]
