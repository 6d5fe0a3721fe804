"""Lock files: `[tool.kernels.dependencies]` -> `kernels.lock` with per-variant content hashes, checked on
load.

Formats read: kernels 0.17 (`dependency` + `lock.commit`), kernels <=0.16 (`repo_id`, `sha`, `variants`), and
kforge's (the 0.17 entry plus `variants: {name: {hash, hash_type}}`). kernels 0.17.2 parses lock files with
unknown fields denied, so `--format kernels` writes the bare 0.17 form for projects that load with `kernels`.

Hash types:
- `metadata_sha256`: sha256 of the variant's metadata.json. Its `digest` lists the hash of every other file
  and is verified on every load, so pinning metadata.json pins every byte of the variant.
- `git_lfs_concat` (kernels <=0.16, for variants without a digest): sha256 over the sorted (path relative to
  the variant, raw file hash) pairs, the file hash being the LFS sha256 for LFS files and the git blob SHA-1
  otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .errors import LockError
from .hub import REPO_TYPE, Hub, _atomic_write, is_commit
from .metadata import _EXCLUDED_TOP, Metadata, digest_files, verify_digest

KFORGE = "kforge"
KERNELS = "kernels"


@dataclass
class LockEntry:
    repo_id: str
    commit: str
    version: int | None = None
    revision: str | None = None
    variants: dict[str, dict] | None = (
        None  # name -> {"hash": "sha256-<hex>", "hash_type": ...}; None: unhashed
    )

    def to_json(self, fmt: str) -> dict:
        dep = {"repo-id": self.repo_id}
        dep.update({"version": self.version} if self.version is not None else {"revision": self.revision})
        out: dict = {"dependency": dep, "lock": {"commit": self.commit}}
        if fmt == KFORGE:
            out["variants"] = dict(sorted((self.variants or {}).items()))
        return out


@dataclass
class Lock:
    entries: list[LockEntry] = field(default_factory=list)
    source: str = "kernels.lock"

    def find(self, repo_id: str) -> LockEntry:
        for e in self.entries:
            if e.repo_id == repo_id:
                return e
        raise LockError(
            f"{self.source}: no entry for {repo_id}; add it to [tool.kernels.dependencies] and run "
            "`kforge lock`"
        )


def _variants(value, where: str) -> dict[str, dict]:
    if not isinstance(value, dict):
        raise LockError(f"{where}: 'variants' must be an object of variant name -> {{hash, hash_type}}")
    for name, v in value.items():
        if not (isinstance(v, dict) and isinstance(v.get("hash"), str) and v["hash"].startswith("sha256-")):
            raise LockError(
                f"{where}: variants[{name!r}] must be {{'hash': 'sha256-<hex>', 'hash_type': ...}}"
            )
    return value


def parse_lock(text: str, source: str) -> Lock:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LockError(f"{source}: not valid JSON ({e}); regenerate it with `kforge lock`") from None
    if not isinstance(data, list):
        raise LockError(f"{source}: expected a JSON list of locked kernels, got {type(data).__name__}")
    lock = Lock(source=source)
    seen = set()
    for i, item in enumerate(data):
        where = f"{source}: entry {i}"
        if not isinstance(item, dict):
            raise LockError(f"{where}: expected an object")
        if "dependency" in item:  # kernels 0.17 / kforge
            dep, lk = item.get("dependency"), item.get("lock")
            if not (isinstance(dep, dict) and isinstance(dep.get("repo-id"), str) and isinstance(lk, dict)):
                raise LockError(
                    f"{where}: expected {{'dependency': {{'repo-id', 'version'|'revision'}}, 'lock': …}}"
                )
            unknown = set(item) - {"dependency", "lock", "variants"}
            if unknown:
                raise LockError(f"{where}: unknown keys {sorted(unknown)}")
            entry = LockEntry(dep["repo-id"], lk.get("commit"), dep.get("version"), dep.get("revision"))
            if "variants" in item:
                entry.variants = _variants(item["variants"], where)
        elif "repo_id" in item:  # kernels <= 0.16
            entry = LockEntry(
                item["repo_id"], item.get("sha"), variants=_variants(item.get("variants"), where)
            )
        else:
            raise LockError(
                f"{where}: neither a kernels 0.17 entry ('dependency') nor a <=0.16 one ('repo_id')"
            )
        if not isinstance(entry.commit, str) or not is_commit(entry.commit):
            raise LockError(
                f"{where} ({entry.repo_id}): commit must be 40 or 64 lowercase hex, got {entry.commit!r}"
            )
        if entry.repo_id in seen:
            raise LockError(f"{where}: {entry.repo_id} is locked twice")
        seen.add(entry.repo_id)
        lock.entries.append(entry)
    return lock


def read_lock(lockfile: Path | None, *, caller: ModuleType | None = None) -> Lock:
    """Read `lockfile`, or (None) the `kernels.lock` in the calling package's installed distribution
    metadata."""
    if lockfile is not None:
        try:
            return parse_lock(Path(lockfile).read_text(), str(lockfile))
        except OSError as e:
            raise LockError(
                f"{lockfile}: cannot read lock file ({e}); create it with `kforge lock <project>`"
            ) from None
    module = caller or _caller_module()
    package = (module.__name__ if module else "").split(".")[0]
    dists = importlib.metadata.packages_distributions().get(package, [])
    for name in dists:
        text = importlib.metadata.distribution(name).read_text("kernels.lock")
        if text is not None:
            return parse_lock(text, f"kernels.lock of distribution {name}")
    raise LockError(
        f"lockfile=None: the calling package {package!r} has no kernels.lock in its installed metadata "
        f"(distributions: {dists or 'none'}); pass lockfile=Path(...) or run `kforge lock` and reinstall"
    )


def _caller_module() -> ModuleType | None:
    for frame in inspect.stack()[1:]:
        module = inspect.getmodule(frame.frame)
        if module is not None and not module.__name__.startswith("kforge"):
            return module
    return None


def git_blob_sha1(path: Path) -> bytes:
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


def _concat(pairs: list[tuple[bytes, bytes]]) -> str:
    m = hashlib.sha256()
    for path, digest in sorted(pairs):
        m.update(path)
        m.update(digest)
    return f"sha256-{m.hexdigest()}"


def local_variant_hash(variant_dir: Path, hash_type: str) -> str:
    """The hash of a variant on disk, as `kforge lock` computes it from the hub."""
    variant_dir = Path(variant_dir)
    if hash_type == "metadata_sha256":
        return "sha256-" + hashlib.sha256((variant_dir / "metadata.json").read_bytes()).hexdigest()
    if hash_type == "git_lfs_concat":
        pairs = []
        for rel in [*digest_files(variant_dir), *sorted(_EXCLUDED_TOP)]:  # every file in the variant
            p = variant_dir / rel
            if not p.exists():
                continue
            blob = Path(p.resolve()).name  # HF cache: LFS blobs are named by sha256, others by git SHA-1
            is_lfs = p.is_symlink() and len(blob) == 64
            digest = hashlib.sha256(p.read_bytes()).digest() if is_lfs else git_blob_sha1(p)
            pairs.append((rel.encode(), digest))
        return _concat(pairs)
    raise LockError(f"unknown hash_type {hash_type!r}; expected metadata_sha256 or git_lfs_concat")


def check_locked_variant(lock: Lock, entry: LockEntry, variant_dir: Path) -> None:
    """Raise LockError unless the variant on disk has the hash recorded in the lock."""
    if entry.variants is None:
        return  # a kernels 0.17 lock pins the commit only
    name = Path(variant_dir).name
    want = entry.variants.get(name)
    if want is None:
        raise LockError(
            f"{lock.source}: {entry.repo_id}@{entry.commit} has no hash for variant {name} (locked: "
            f"{', '.join(sorted(entry.variants)) or 'none'}); run `kforge lock` again"
        )
    got = local_variant_hash(variant_dir, want.get("hash_type", "git_lfs_concat"))
    if got != want["hash"]:
        raise LockError(
            f"refusing to load {variant_dir}: its content hash {got} differs from {want['hash']} locked for "
            f"{entry.repo_id} variant {name} in {lock.source}. Delete the cached kernel and run `kforge "
            "download`, "
            "or re-lock if the change is intended."
        )


# ---- creating locks (`kforge lock`)
# -------------------------------------------------------------------------


def project_dependencies(project_dir: Path) -> dict[str, int]:
    path = Path(project_dir) / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise LockError(
            f"{path}: cannot read ({e}); `kforge lock` needs a Python project directory"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise LockError(f"{path}: not valid TOML ({e})") from None
    deps = data.get("tool", {}).get("kernels", {}).get("dependencies")
    if deps is None:
        raise LockError(
            f'{path}: no [tool.kernels.dependencies] table; add e.g. "kernels-community/relu" = 1'
        )
    if not isinstance(deps, dict):
        raise LockError(
            f'{path}: [tool.kernels.dependencies] must be a table of "org/name" = <major version>'
        )
    for repo_id, version in deps.items():
        if "/" not in repo_id:
            raise LockError(
                f"{path}: [tool.kernels.dependencies] key {repo_id!r} must be a repo id 'org/name'"
            )
        if not isinstance(version, int) or isinstance(version, bool):
            raise LockError(
                f"{path}: [tool.kernels.dependencies] {repo_id!r} = {version!r}: expected an integer major "
                "version "
                f"(e.g. {repo_id!r} = 1); version specifier strings are no longer supported"
            )
    return deps


def lock_repo(hub: Hub, repo_id: str, version: int | None, revision: str | None) -> tuple[LockEntry, list]:
    """Lock one repo: its commit and every variant's hash; returns the entry and the kernel-depends found."""
    from huggingface_hub.hf_api import RepoFile

    commit = hub.resolve_commit(repo_id, revision, version, local_only=False)
    tree = hub._call(
        repo_id,
        commit,
        hub.api.list_repo_tree,
        repo_id,
        path_in_repo="build",
        repo_type=REPO_TYPE,
        revision=commit,
        recursive=True,
    )
    files: dict[str, list[tuple[bytes, bytes]]] = {}
    for f in tree:
        parts = f.path.split("/")
        if not isinstance(f, RepoFile) or len(parts) < 3 or "__pycache__" in parts or f.path.endswith(".pyc"):
            continue
        oid = f.lfs.sha256 if f.lfs is not None else f.blob_id
        files.setdefault(parts[1], []).append(("/".join(parts[2:]).encode(), bytes.fromhex(oid)))
    if not files:
        raise LockError(
            f"{repo_id}@{commit}: no files under build/; was the kernel pushed to branch v{version}?"
        )
    variants, depends = {}, []
    for name in sorted(files):
        md_path = hub.download_file(repo_id, commit, f"build/{name}/metadata.json")
        meta = Metadata.read_from_file(md_path)
        depends += meta.kernel_depends
        if meta.digest is not None:
            h = "sha256-" + hashlib.sha256(md_path.read_bytes()).hexdigest()
            variants[name] = {"hash": h, "hash_type": "metadata_sha256"}
        else:
            variants[name] = {"hash": _concat(files[name]), "hash_type": "git_lfs_concat"}
    return LockEntry(repo_id, commit, version, revision, variants), depends


def lock_project(project_dir: Path, *, fmt: str = KFORGE, out=print) -> Path:
    """Resolve [tool.kernels.dependencies] (and their kernel-depends, recursively) into
    <project>/kernels.lock."""
    if fmt not in (KFORGE, KERNELS):
        raise LockError(f"--format {fmt!r}: expected {KFORGE!r} (with per-variant hashes) or {KERNELS!r}")
    hub = Hub()
    todo = [(r, v, None) for r, v in project_dependencies(project_dir).items()]
    entries: dict[str, LockEntry] = {}
    while todo:
        repo_id, version, revision = todo.pop(0)
        if repo_id in entries:
            prev = entries[repo_id]
            if (prev.version, prev.revision) != (version, revision):
                raise LockError(
                    f"{repo_id} is required both as {prev.version or prev.revision!r} and as "
                    f"{version or revision!r}; one lock file holds one version of each kernel"
                )
            continue
        entry, depends = lock_repo(hub, repo_id, version, revision)
        entries[repo_id] = entry
        out(
            f"locked {repo_id} {'v' + str(version) if version is not None else revision} -> {entry.commit} "
            f"({len(entry.variants)} variants)"
        )
        todo += [(d.repo_id, d.version, d.revision) for d in depends]
    path = Path(project_dir) / "kernels.lock"
    text = json.dumps([e.to_json(fmt) for e in entries.values()], indent=2) + "\n"
    _atomic_write(path, text)  # a temporary unique to this run: two `kforge lock` runs cannot collide
    return path


def download_project(project_dir: Path, *, all_variants: bool = False, backend=None, out=print) -> list[Path]:
    """Fetch the locked kernels of a project into the cache, checking each variant against its lock hash."""
    from .loader import resolve_variant

    lock = read_lock(Path(project_dir) / "kernels.lock")
    hub = Hub()
    dirs = []
    for entry in lock.entries:
        if all_variants:
            names = (
                sorted(entry.variants) if entry.variants else hub.list_variants(entry.repo_id, entry.commit)
            )
            variant_dirs = [hub.download_variant(entry.repo_id, entry.commit, n) for n in names]
        else:
            r = resolve_variant(entry.repo_id, revision=entry.commit, backend=backend, trust_remote_code=True)
            variant_dirs = [r.variant_dir]
        for d in variant_dirs:
            verify_digest(d, Metadata.read_from_file(d / "metadata.json"))
            check_locked_variant(lock, entry, d)
            out(f"downloaded {entry.repo_id}@{entry.commit[:12]} {d.name} -> {d}")
        dirs += variant_dirs
    return dirs
