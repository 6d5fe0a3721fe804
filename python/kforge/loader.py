"""Find, download, verify and import kernel variants (kernels 0.17 semantics, reference §1, §3.7, §3.8, §4)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .metadata import Metadata, verify_digest
from .system import detect_system
from .variants import System, VariantAccepted, VariantRejected, resolve

REPO_TYPE = "kernel"


class NoCompatibleVariantError(FileNotFoundError):
    """The repo offers variants, but none runs on this system."""


@dataclass(frozen=True)
class RepoInfo:
    repo_id: str
    revision: str


@dataclass(frozen=True)
class LoadedKernel:
    metadata: Metadata
    module: ModuleType
    repo_info: RepoInfo | None


_loaded_by_path: dict[Path, LoadedKernel] = {}


def get_loaded_kernels() -> list[LoadedKernel]:
    return list(_loaded_by_path.values())


def _cache_dir() -> str | None:
    return os.environ.get("KERNELS_CACHE") or None


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def no_variant_message(where: str, trace: list, system: System) -> str:
    lines = [f"no kernel variant in {where} is compatible with this system ({system.describe()})."]
    if not trace:
        lines.append("The repo offers no variant directories under build/.")
    else:
        width = max(len(r.name) for r in trace)
        lines.append("Variants offered, and why each was rejected:")
        for r in trace:
            lines.append(f"  {r.name:<{width}}  {getattr(r, 'reason', 'accepted')}")
    return "\n".join(lines)


def choose_variant(names: list[str], system: System, where: str) -> tuple[str, list]:
    trace = resolve(names, system)
    if not trace or not isinstance(trace[0], VariantAccepted):
        raise NoCompatibleVariantError(no_variant_message(where, trace, system))
    return trace[0].name, trace


def check_arch(meta: Metadata, variant_dir: Path) -> None:
    """Reject a variant whose backend.archs does not cover the current device (reference §3.6)."""
    if meta.backend is None or not meta.backend.archs:
        return
    try:
        import torch
    except ImportError:
        return
    if meta.backend.backend_type == "cuda" and torch.version.cuda and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        if _cuda_archs_cover(meta.backend.archs, major, minor) is False:
            raise RuntimeError(
                f"{variant_dir}: built for CUDA archs {list(meta.backend.archs)}, which do not cover this "
                f"device's capability {major}.{minor}; pass check_arch=False to load it anyway"
            )
    if meta.backend.backend_type == "rocm" and getattr(torch.version, "hip", None) and torch.cuda.is_available():
        arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
        if arch not in meta.backend.archs:
            raise RuntimeError(f"{variant_dir}: built for {list(meta.backend.archs)}, device is {arch}")


def _cuda_archs_cover(archs, major: int, minor: int) -> bool | None:
    """True/False; None when no arch string parses (then the variant counts as compatible)."""
    parsed_any = False
    for a in archs:
        ptx = a.endswith("+PTX")
        core = a[:-4] if ptx else a
        suffix = core[-1] if core and core[-1] in "af" else ""
        core = core[:-1] if suffix else core
        try:
            am, an = (int(x) for x in core.split("."))
        except ValueError:
            continue
        parsed_any = True
        if ptx and (major, minor) >= (am, an):
            return True
        if suffix == "a" and (major, minor) == (am, an):
            return True
        if suffix in ("", "f") and not ptx and major == am and minor >= an:
            return True
    return None if not parsed_any else False


def import_variant(variant_dir: Path, repo_info: RepoInfo | None = None) -> ModuleType:
    """Verify, then import `variant_dir` as `sys.modules[metadata.id]`; memoized per path."""
    variant_dir = Path(variant_dir).resolve()
    meta = Metadata.read_from_file(variant_dir / "metadata.json")
    verify_digest(variant_dir, meta)  # on every load, even a memoized one: cheap when nothing changed
    if variant_dir in _loaded_by_path:
        return _loaded_by_path[variant_dir].module
    entry = variant_dir / "__init__.py"
    if not entry.exists():
        entry = variant_dir / meta.python_name / "__init__.py"
    if not entry.exists():
        raise FileNotFoundError(f"{variant_dir}: neither __init__.py nor {meta.python_name}/__init__.py exists")
    existing = sys.modules.get(meta.id)
    if existing is not None and Path(getattr(existing, "__file__", "") or "").resolve().parent != entry.parent:
        raise ImportError(
            f"module {meta.id!r} is already loaded from {existing.__file__}; a different build "
            f"({variant_dir}) claims the same id. Two builds must not share a metadata id."
        )
    spec = importlib.util.spec_from_file_location(meta.id, entry)
    module = importlib.util.module_from_spec(spec)
    sys.modules[meta.id] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(meta.id, None)  # never leave a half-imported kernel behind
        where = f" from {repo_info.repo_id}@{repo_info.revision}" if repo_info else ""
        e.add_note(f"while loading kernel {meta.name} variant {variant_dir.name}{where}")
        raise
    _loaded_by_path[variant_dir] = LoadedKernel(meta, module, repo_info)
    return module


def _local_variant_names(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.is_dir() and (p / "metadata.json").exists()] if root.is_dir() else []


def find_local_variant(repo_path: Path, backend: str | None) -> Path:
    repo_path = Path(repo_path)
    system = detect_system(backend)
    for root in (repo_path, repo_path / "build"):
        names = _local_variant_names(root)
        if names:
            name, _ = choose_variant(names, system, str(root))
            return root / name
    if (repo_path / "metadata.json").exists():
        return repo_path
    raise FileNotFoundError(f"{repo_path}: no variant directories (build/<variant>/metadata.json) found")


def _local_override(repo_id: str) -> Path | None:
    for item in filter(None, os.environ.get("LOCAL_KERNELS", "").split(":")):
        rid, sep, path = item.partition("=")
        if not sep:
            raise ValueError(f"LOCAL_KERNELS entry {item!r}: expected org/name=/path")
        if rid == repo_id:
            return Path(path)
    return None


def _exactly_one(revision, version) -> None:
    if (revision is None) == (version is None):
        raise ValueError(
            "give exactly one of version= (major version N, branch vN) or revision= (branch, tag or commit); "
            "see /docs/kernels/migration"
        )


def _api(user_agent):
    from huggingface_hub import HfApi

    return HfApi(library_name="kforge", library_version="0.1.0", user_agent=user_agent)


def _repo_cache(repo_id: str) -> Path:
    from huggingface_hub import constants

    base = Path(_cache_dir() or constants.HF_HUB_CACHE)
    return base / ("kernels--" + repo_id.replace("/", "--"))


def _is_commit(rev: str) -> bool:
    return len(rev) in (40, 64) and all(c in "0123456789abcdef" for c in rev)


def _resolve_commit(repo_id: str, revision, version, api) -> str:
    """Commit for version/revision; cached refs and pinned commits need no request (gaps §4.1, §4.3)."""
    ref = f"v{version}" if version is not None else revision
    if _is_commit(ref):
        return ref
    ref_file = _repo_cache(repo_id) / "refs" / ref
    if _offline():
        if ref_file.exists():
            return ref_file.read_text().strip()
        raise FileNotFoundError(
            f"HF_HUB_OFFLINE is set and {repo_id}@{ref} is not in the cache ({ref_file} missing); "
            "load it once online or pass revision=<commit>"
        )
    if version is not None:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
        branches = {b.name: b.target_commit for b in refs.branches}
        if ref not in branches:
            have = sorted(int(n[1:]) for n in branches if n[1:].isdigit() and n.startswith("v"))
            raise ValueError(f"{repo_id} has no version {version}; available versions: {have or 'none'}")
        commit = branches[ref]
    else:
        commit = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=ref).sha
    _record_ref(ref_file, commit)  # so version=N works offline later
    return commit


def _record_ref(ref_file: Path, commit: str) -> None:
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref_file.with_name(f".{ref_file.name}.{os.getpid()}.tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref_file)


def _check_trust(repo_id: str, trust_remote_code, api) -> None:
    if trust_remote_code is True or (isinstance(trust_remote_code, list) and repo_id in trust_remote_code):
        return
    owner = repo_id.split("/")[0]
    try:
        trusted = bool(getattr(api.get_organization_overview(owner), "trustedKernelPublisher", False))
    except Exception as e:
        raise PermissionError(
            f"could not verify publisher trust for {owner!r} ({e}); pass trust_remote_code=True "
            f"or trust_remote_code=[{repo_id!r}] if you trust this repo"
        ) from None
    if not trusted:
        raise PermissionError(
            f"{owner!r} is not a trusted kernel publisher; pass trust_remote_code=[{repo_id!r}] to load {repo_id}"
        )


@contextlib.contextmanager
def _install_lock(repo_id: str):
    from filelock import FileLock

    path = _repo_cache(repo_id)
    path.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path / ".kforge-install.lock")):
        yield


def _hub_variant_names(repo_id: str, commit: str, api) -> list[str]:
    snap = _repo_cache(repo_id) / "snapshots" / commit / "build"
    if _offline():
        return _local_variant_names(snap)
    from huggingface_hub.hf_api import RepoFolder

    tree = api.list_repo_tree(repo_id, path_in_repo="build", repo_type=REPO_TYPE, revision=commit)
    return [e.path.split("/", 1)[1] for e in tree if isinstance(e, RepoFolder)]


def _cached_variant(repo_id: str, commit: str, system: System) -> Path | None:
    """A fully cached variant for a pinned commit: load it without any request."""
    snap = _repo_cache(repo_id) / "snapshots" / commit / "build"
    names = _local_variant_names(snap)
    if not names:
        return None
    trace = resolve(names, system)
    if trace and isinstance(trace[0], VariantAccepted) and (snap / trace[0].name / ".kforge-complete").exists():
        return snap / trace[0].name
    return None


def install_kernel(
    repo_id: str,
    *,
    revision=None,
    version=None,
    backend=None,
    local_files_only: bool = False,
    user_agent=None,
    trust_remote_code=False,
) -> Path:
    """Download the best variant for this system (no import) and return its directory."""
    _exactly_one(revision, version)
    system = detect_system(backend)
    api = _api(user_agent)
    commit = _resolve_commit(repo_id, revision, version, api)
    cached = _cached_variant(repo_id, commit, system)
    if cached is not None:
        return cached
    if local_files_only or _offline():
        snap = _repo_cache(repo_id) / "snapshots" / commit / "build"
        name, _ = choose_variant(_local_variant_names(snap), system, f"the cache of {repo_id}@{commit}")
        return snap / name
    _check_trust(repo_id, trust_remote_code, api)
    name, _ = choose_variant(_hub_variant_names(repo_id, commit, api), system, f"{repo_id}@{commit}")
    from huggingface_hub import snapshot_download

    with _install_lock(repo_id):
        root = snapshot_download(
            repo_id,
            repo_type=REPO_TYPE,
            revision=commit,
            allow_patterns=[f"build/{name}/*"],
            ignore_patterns=["*.pyc", "**/__pycache__/**"],
            cache_dir=_cache_dir(),
            library_name="kforge",
            user_agent=user_agent,
        )
        variant_dir = Path(root) / "build" / name
        meta = Metadata.read_from_file(variant_dir / "metadata.json")
        verify_digest(variant_dir, meta)
        (variant_dir / ".kforge-complete").write_text(json.dumps({"repo": repo_id, "commit": commit}))
    return variant_dir


def get_kernel(
    repo_id: str,
    *,
    revision=None,
    version=None,
    backend=None,
    user_agent=None,
    trust_remote_code=False,
    check_arch: bool = True,
) -> ModuleType:
    override = _local_override(repo_id)
    if override is not None:
        return get_local_kernel(override, backend=backend)
    variant_dir = install_kernel(
        repo_id,
        revision=revision,
        version=version,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
    )
    meta = Metadata.read_from_file(variant_dir / "metadata.json")
    if check_arch:
        globals()["check_arch"](meta, variant_dir)
    commit = variant_dir.parent.parent.name
    return import_variant(variant_dir, RepoInfo(repo_id, commit))


def get_local_kernel(repo_path, *, backend=None, trust_remote_code=False, user_agent=None) -> ModuleType:
    return import_variant(find_local_variant(Path(repo_path), backend))


def has_kernel(
    repo_id: str, *, revision=None, version=None, backend=None, trust_remote_code=False, check_arch=True
) -> bool:
    try:
        variant_dir = install_kernel(
            repo_id, revision=revision, version=version, backend=backend, trust_remote_code=trust_remote_code
        )
        if check_arch:
            globals()["check_arch"](Metadata.read_from_file(variant_dir / "metadata.json"), variant_dir)
    except NoCompatibleVariantError:
        return False
    except RuntimeError as e:
        if "do not cover" in str(e) or "built for" in str(e):
            return False
        raise
    return True


def get_kernel_variants(
    repo_id: str, *, revision=None, version=None, backend=None
) -> list[VariantAccepted | VariantRejected]:
    _exactly_one(revision, version)
    api = _api(None)
    commit = _resolve_commit(repo_id, revision, version, api)
    return resolve(_hub_variant_names(repo_id, commit, api), detect_system(backend))


def _read_lock(lockfile) -> list:
    if lockfile is None:
        raise ValueError("lockfile=None (read kernels.lock from the calling distribution) is not supported yet")
    try:
        return json.loads(Path(lockfile).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{lockfile}: cannot read kernels.lock ({e})") from None


def _locked_commit(repo_id: str, lockfile) -> str:
    for entry in _read_lock(lockfile):
        dep = entry.get("dependency", {}) if isinstance(entry, dict) else {}
        if dep.get("repo-id") == repo_id:
            return entry["lock"]["commit"]
    raise ValueError(f"{lockfile}: no entry for {repo_id}; run `kforge lock` to add it")


def get_locked_kernel(repo_id: str, *, lockfile, trust_remote_code=False, user_agent=None) -> ModuleType:
    return get_kernel(
        repo_id, revision=_locked_commit(repo_id, lockfile), trust_remote_code=trust_remote_code, user_agent=user_agent
    )


def load_kernel(repo_id: str, *, lockfile, backend=None) -> ModuleType:
    """Load a locked kernel from the cache only; never downloads."""
    commit = _locked_commit(repo_id, lockfile)
    variant_dir = install_kernel(repo_id, revision=commit, backend=backend, local_files_only=True)
    return import_variant(variant_dir, RepoInfo(repo_id, commit))



