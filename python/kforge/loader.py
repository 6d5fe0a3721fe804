"""Find, download, verify and import kernel variants (kernels 0.17 semantics, reference §1.1, §3, §4)."""

from __future__ import annotations

import contextvars
import importlib.util
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from packaging.version import Version

from .errors import ArchMismatchError, KernelImportError, MetadataError
from .hub import (
    CommitState,
    Hub,
    check_repo_id,
    check_revision,
    check_version,
    choose_variant,
    offline,
    repo_cache,
    trust_allows,
    untrusted,
)
from .metadata import Metadata, verify_digest
from .signing import enforce_trust
from .system import detect_system
from .variants import VariantAccepted, VariantRejected, resolve

log = logging.getLogger("kforge")

# The `kernels` release whose API and metadata this loader implements; `kernels-minver` is compared with it.
KERNELS_API_VERSION = "0.17.2"

# python-depends allowlist (reference §5.2): name -> importable module (None: nothing to import).
_PY_DEPS_GENERAL = {"einops": "einops", "helion": "helion", "tvm-ffi": "tvm_ffi"}
_PY_DEPS_BACKEND = {
    "cuda": {"nvidia-cutlass-dsl": "cutlass"},
    "neuron": {"nki": "nki"},
    "xpu": {"onednn": None},
}


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
# Serializes imports: without it a second thread loading the same kernel sees sys.modules[metadata.id] set
# (but not yet executed) by the first and refuses it as "another build with the same id". Reentrant, because a
# kernel's __init__.py may itself load kernels.
_import_lock = threading.RLock()
# Dependencies visible to get_kernel_dep while a kernel's __init__.py runs.
_current_deps: contextvars.ContextVar[dict[str, ModuleType] | None] = contextvars.ContextVar(
    "kforge_kernel_deps", default=None
)


def get_loaded_kernels() -> list[LoadedKernel]:
    return list(_loaded_by_path.values())


def get_kernel_dep(repo_id: str) -> ModuleType:
    """Called by a kernel's own code while it is imported: one of its declared `kernel-depends`."""
    deps = _current_deps.get()
    if deps is None:
        raise RuntimeError("get_kernel_dep() can only be called while a kernel is being loaded")
    if repo_id not in deps:
        raise RuntimeError(
            f"kernel dependency {repo_id!r} is not declared in kernel-depends (declared: {list(deps)})"
        )
    return deps[repo_id]


def _cuda_arch_covers(arch: str, major: int, minor: int) -> bool | None:
    """One `backend.archs` entry against a capability (reference §3.6); None when it does not parse. The
    suffix decides before `+PTX`: `9.0a+PTX` is still only for 9.0 exactly, `10.0f+PTX` for 10.x only."""
    ptx = arch.endswith("+PTX")
    core = arch[: -len("+PTX")] if ptx else arch
    suffix = core[-1] if core[-1:] in ("a", "f") else ""
    core = core[:-1] if suffix else core
    am, sep, an = core.partition(".")
    if not sep or not (am.isdigit() and an.isdigit()):  # isdigit: no signs, spaces or a third component
        return None
    am, an = int(am), int(an)
    if suffix == "a":
        return (major, minor) == (am, an)
    if suffix == "f" or not ptx:
        return major == am and minor >= an
    return (major, minor) >= (am, an)


def _cuda_archs_cover(archs, major: int, minor: int) -> bool | None:
    """True/False; None when no arch string parses (then the variant counts as compatible)."""
    results = [_cuda_arch_covers(a, major, minor) for a in archs]
    if all(r is None for r in results):
        return None
    return any(results)


def verify_arch(meta: Metadata, variant_dir: Path) -> None:
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
            raise ArchMismatchError(
                f"{variant_dir}: built for CUDA archs {list(meta.backend.archs)}, which do not cover this "
                f"device's capability {major}.{minor}; rebuild with that capability, or pass check_arch=False"
            )
    if (
        meta.backend.backend_type == "rocm"
        and getattr(torch.version, "hip", None)
        and torch.cuda.is_available()
    ):
        arch = torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName.split(":")[0]
        if arch not in meta.backend.archs:
            raise ArchMismatchError(
                f"{variant_dir}: built for ROCm archs {list(meta.backend.archs)}, this device is {arch}; "
                "rebuild for it, or pass check_arch=False"
            )


def validate_metadata(meta: Metadata, variant_dir: Path) -> None:
    """Python dependency allowlist, minimum loader version and the dirty-build warning (reference §3.8,
    §5.2)."""
    where = variant_dir / "metadata.json"
    backend = meta.backend.backend_type if meta.backend else None
    allowed = {**_PY_DEPS_GENERAL, **_PY_DEPS_BACKEND.get(backend, {})}
    for dep in meta.python_depends:
        if dep not in allowed:
            raise MetadataError(
                f"{where}: unsupported kernel dependency {dep!r} in python-depends; allowed for backend "
                f"{backend}: {', '.join(sorted(allowed))}"
            )
        module = allowed[dep]
        if module is not None and importlib.util.find_spec(module) is None:
            raise ImportError(f"kernel {meta.name} needs the Python package {dep!r}: run `pip install {dep}`")
    if meta.kernels_minver is not None:
        try:
            need = Version(meta.kernels_minver)
        except ValueError:
            raise MetadataError(f"{where}: kernels-minver {meta.kernels_minver!r} is not a version") from None
        if Version(KERNELS_API_VERSION) < Version(need.base_version):
            raise RuntimeError(
                f"kernel {meta.name} needs kernels >= {need}, kforge implements kernels "
                f"{KERNELS_API_VERSION}: "
                "upgrade kforge"
            )
    if meta.dirty:
        log.warning("kernel %s (%s) was built from a dirty source tree", meta.name, variant_dir)


def import_variant(
    variant_dir: Path,
    repo_info: RepoInfo | None = None,
    deps: dict[str, ModuleType] | None = None,
    meta: Metadata | None = None,
) -> ModuleType:
    """Verify, then import `variant_dir` as `sys.modules[metadata.id]`; memoized per path."""
    variant_dir = Path(variant_dir).absolute()
    if meta is None:
        meta = Metadata.read_from_file(variant_dir / "metadata.json")
    verify_digest(
        variant_dir, meta
    )  # on every load, even a memoized one: a stat per file when nothing changed
    if repo_info is not None:
        # Publishers in the trust file (docs/signing.md): a signature must verify, or be present at all
        # when the publisher requires signatures; checked before anything of the variant is imported.
        enforce_trust(repo_info.repo_id, variant_dir)
    with _import_lock:
        return _import_verified(variant_dir, repo_info, deps, meta)


def _import_verified(variant_dir: Path, repo_info, deps, meta: Metadata) -> ModuleType:
    if variant_dir in _loaded_by_path:
        return _loaded_by_path[variant_dir].module
    if os.environ.get("KFORGE_REQUIRE_DIGEST") == "1" and meta.digest is None:
        raise MetadataError(f"{variant_dir / 'metadata.json'}: has no digest and KFORGE_REQUIRE_DIGEST=1")
    entry = variant_dir / "__init__.py"
    if not entry.exists():
        entry = variant_dir / meta.python_name / "__init__.py"
    if not entry.exists():
        raise FileNotFoundError(
            f"{variant_dir}: neither __init__.py nor {meta.python_name}/__init__.py exists"
        )
    existing = sys.modules.get(meta.id)
    same = next((k for k in _loaded_by_path.values() if k.module is existing), None)
    if same is not None and meta.digest is not None and same.metadata.raw == meta.raw:
        # The same build in another place (e.g. a second cache dir): both verified against one digest.
        _loaded_by_path[variant_dir] = same
        return same.module
    if existing is not None:
        raise ImportError(
            f"module {meta.id!r} is already loaded from {getattr(existing, '__file__', '?')}; a different "
            f"build ({variant_dir}) claims the same metadata id. Two builds must not share an id: rebuild "
            "one of them."
        )
    _purge_bytecode(variant_dir)
    spec = importlib.util.spec_from_file_location(meta.id, entry)
    module = importlib.util.module_from_spec(spec)
    sys.modules[meta.id] = module
    token = _current_deps.set(dict(deps or {}))
    # Import from the verified sources only: bytecode is outside the digest, and Python would run a
    # planted (or unchecked-hash) .pyc without reading the source it claims to come from.
    dont_write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(meta.id, None)  # never leave a half-imported kernel behind
        for name in [n for n in sys.modules if n.startswith(meta.id + ".")]:
            del sys.modules[name]
        where = f" from {repo_info.repo_id}@{repo_info.revision}" if repo_info else ""
        causes, c = [], e
        while c is not None and len(causes) < 4:  # torch's load_library hides the dlopen error in __cause__
            causes.append(f"{type(c).__name__}: {c}")
            c = c.__cause__ or c.__context__
        native = any("undefined symbol" in m or m.startswith("OSError") for m in causes)
        hint = (
            "the native library does not match this torch/system: rebuild the kernel for it, or pick another "
            "variant with backend="
            if native
            else "the kernel's Python code failed: report it to the kernel's author"
        )
        raise KernelImportError(
            f"importing kernel {meta.name} variant {variant_dir.name}{where} failed: {' <- '.join(causes)}\n"
            f"({entry}); {hint}"
        ) from e
    finally:
        sys.dont_write_bytecode = dont_write_bytecode
        _current_deps.reset(token)
    _loaded_by_path[variant_dir] = LoadedKernel(meta, module, repo_info)
    return module


def _purge_bytecode(variant_dir: Path) -> None:
    """Remove every .pyc (and __pycache__) under a verified variant dir; refuse to load if one can't go."""
    for pyc in sorted(variant_dir.rglob("*.pyc")):
        try:
            pyc.unlink()
        except OSError as e:
            raise KernelImportError(
                f"{pyc}: bytecode in a kernel variant is not covered by its digest and could not be removed "
                f"({e.strerror}); delete it, or load a copy of the variant from a writable directory"
            ) from None


def _local_variant_names(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return [p.name for p in root.iterdir() if p.is_dir() and _has_metadata(p)]


def _has_metadata(variant_dir: Path) -> bool:
    """metadata.json is there, or a link to it is (a broken one is then reported when it is read)."""
    md = variant_dir / "metadata.json"
    return md.exists() or md.is_symlink()


def find_local_variant(repo_path: Path, backend: str | None) -> Path:
    """Variant dir for `repo_path`: a repo root, its build/ folder, or a variant dir itself (reference
    §1.1)."""
    repo_path = Path(repo_path)
    if not repo_path.exists():
        raise FileNotFoundError(f"{repo_path}: no such kernel directory")
    system = detect_system(backend)
    for root in (repo_path, repo_path / "build"):
        names = _local_variant_names(root)
        if names:
            name, _ = choose_variant(names, system, str(root))
            return root / name
    if _has_metadata(repo_path):
        return repo_path
    raise FileNotFoundError(f"{repo_path}: no variant directories (build/<variant>/metadata.json) found")


def local_overrides() -> dict[str, Path]:
    """LOCAL_KERNELS=org/a=/path/a<pathsep>org/b=/path/b (os.pathsep, so Windows drive letters survive)."""
    out = {}
    for item in filter(None, os.environ.get("LOCAL_KERNELS", "").split(os.pathsep)):
        rid, sep, path = item.partition("=")
        if not sep or "/" not in rid or not path:
            raise ValueError(f"LOCAL_KERNELS entry {item!r}: expected org/name=/path/to/kernel")
        out[rid] = Path(path)
    return out


def _check_args(repo_id, *, revision=None, version=None, backend=None, trust_remote_code=False) -> None:
    """Validate the arguments every loading function shares, before any request or cache access, so a
    wrong call fails with a message about the argument and not deep inside the hub client."""
    check_repo_id(repo_id)
    _exactly_one(revision, version)
    check_version(version)
    check_revision(revision)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be a str such as 'cpu' or 'cuda', or None, got {backend!r}")
    trust_allows(repo_id, trust_remote_code)  # raises TypeError for anything but a bool or a list of ids


def _exactly_one(revision, version) -> None:
    if revision is not None and version is not None:
        raise ValueError(
            "give only one of version= (major version N, branch vN) or revision= (branch, tag, commit)"
        )
    if revision is None and version is None:
        raise ValueError(
            "give version= (major version N, branch vN) or revision= (branch, tag or commit); loading an "
            "unpinned kernel is not allowed (see /docs/kernels/migration)"
        )


@dataclass
class Resolved:
    repo_id: str
    commit: str
    variant_dir: Path
    state: CommitState
    meta: Metadata | None = None  # read when the variant was downloaded / verified


def resolve_variant(
    repo_id: str,
    *,
    revision=None,
    version=None,
    backend=None,
    local_files_only: bool = False,
    user_agent=None,
    trust_remote_code=False,
    download: bool = True,
) -> Resolved:
    """Pick and (with download=True) fetch the best variant. A commit whose chosen variant was fetched and
    verified before, by a publisher trusted then, is returned without any network request."""
    _check_args(
        repo_id, revision=revision, version=version, backend=backend, trust_remote_code=trust_remote_code
    )
    system = detect_system(backend)
    hub = Hub(user_agent)
    local_only = local_files_only or offline()
    commit = hub.resolve_commit(repo_id, revision, version, local_only=local_only)
    state = CommitState.load(repo_id, commit)
    snap = repo_cache(repo_id) / "snapshots" / commit / "build"
    allowed = trust_allows(repo_id, trust_remote_code)

    def check_trust() -> None:
        if allowed or state.trusted_publisher is True:
            return
        if local_only:
            why = (
                "recorded when it was downloaded"
                if state.trusted_publisher is False
                else "cannot check offline"
            )
            raise untrusted(repo_id, why)
        state.trusted_publisher = hub.is_trusted_publisher(repo_id)
        if not state.trusted_publisher:
            raise untrusted(repo_id, "the hub's organization overview says so")

    names = state.variants
    if not names and local_only:
        # Only what happens to be cached; not recorded, since the hub may offer more variants.
        names = _local_variant_names(snap)
        if not names:
            raise FileNotFoundError(
                f"offline and no variant of {repo_id}@{commit} is cached under {snap}; load it once online"
            )
    elif not names:
        check_trust()  # before the first request that lists or fetches anything of the repo
        names = state.variants = hub.list_variants(repo_id, commit)
    name, _ = choose_variant(names, system, f"{repo_id}@{commit}")
    variant_dir = snap / name
    check_trust()
    if download and not (name in state.verified and (variant_dir / "metadata.json").is_file()):
        if local_only:
            if not (variant_dir / "metadata.json").is_file():
                raise FileNotFoundError(
                    f"offline and variant {name} of {repo_id}@{commit} is not cached ({variant_dir}): "
                    "load it once online"
                )
        else:
            variant_dir = hub.download_variant(repo_id, commit, name)
    meta = None
    if download:
        meta = Metadata.read_from_file(variant_dir / "metadata.json")
        if local_only and name not in state.verified:
            _require_fully_cached(variant_dir, meta, f"{repo_id}@{commit}")
        verified = verify_digest(variant_dir, meta, known_stamp=state.verified.get(name))
        state.verified[name] = verified or []
    state.save_if_changed()
    return Resolved(repo_id, commit, variant_dir, state, meta)


def _require_fully_cached(variant_dir: Path, meta: Metadata, where: str) -> None:
    """Offline, a variant never downloaded whole (has_kernel fetches only its metadata.json; a download may
    have been cut off) is "not cached", not a digest mismatch that suggests tampering."""
    if meta.digest is None or not isinstance(meta.digest.get("files"), dict):
        return
    # lexists: a link to a deleted blob is a damaged cache (verify_digest says so), not a file never fetched.
    absent = sorted(rel for rel in meta.digest["files"] if not os.path.lexists(variant_dir / rel))
    if absent:
        shown = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        raise FileNotFoundError(
            f"offline and variant {variant_dir.name} of {where} is only partly cached in {variant_dir} "
            f"({shown} not downloaded; has_kernel fetches only metadata.json): load it once online"
        )


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
    """Download the best variant for this system and its kernel dependencies (no import); return its
    directory."""
    _check_args(
        repo_id, revision=revision, version=version, backend=backend, trust_remote_code=trust_remote_code
    )

    def locate(rid, rev, ver):
        return resolve_variant(
            rid,
            revision=rev,
            version=ver,
            backend=backend,
            local_files_only=local_files_only,
            user_agent=user_agent,
            trust_remote_code=trust_remote_code,
        ).variant_dir

    return _walk_tree(repo_id, revision, version, backend=backend, locate=locate)


def _walk_tree(repo_id, revision, version, *, backend, locate, visit=None, chain=()) -> Path:
    """The kernel `repo_id` and its kernel-depends, depth first and cycle-checked: each one's variant
    directory from LOCAL_KERNELS or `locate(repo_id, revision, version)`, then `visit(meta, variant_dir)`
    before its dependencies. Returns the root's variant directory."""
    override = local_overrides().get(repo_id)
    if override is not None:
        variant_dir = find_local_variant(override, backend)
    else:
        variant_dir = locate(repo_id, revision, version)
    meta = Metadata.read_from_file(variant_dir / "metadata.json")
    if visit is not None:
        visit(meta, variant_dir)
    for dep in meta.kernel_depends:
        _check_cycle(chain, repo_id, dep.repo_id)
        _walk_tree(
            dep.repo_id,
            dep.revision,
            dep.version,
            backend=backend,
            locate=locate,
            visit=visit,
            chain=(*chain, repo_id),
        )
    return variant_dir


def _check_cycle(chain: tuple, repo_id: str, dep_id: str) -> None:
    if dep_id in chain or dep_id == repo_id:
        raise ValueError(f"kernel dependency cycle: {' -> '.join([*chain, repo_id, dep_id])}")


def _load_deps(meta: Metadata, repo_id: str, *, backend, user_agent, trust_remote_code, check, chain, locked):
    """Load `meta`'s kernel-depends first (reference §1.1). With `locked` (a lock load), each dependency is
    the commit its lock entry pins, hash-checked like the kernel itself, as kernels' locked resolvers do."""
    deps = {}
    for dep in meta.kernel_depends:
        _check_cycle(chain, repo_id, dep.repo_id)
        if locked is not None:
            deps[dep.repo_id] = _load_locked_entry(
                dep.repo_id, locked, chain=(*chain, repo_id), user_agent=user_agent
            )
            continue
        deps[dep.repo_id] = _get_kernel(
            dep.repo_id,
            revision=dep.revision,
            version=dep.version,
            backend=backend,
            user_agent=user_agent,
            trust_remote_code=trust_remote_code,
            check=check,
            chain=(*chain, repo_id),
        )
    return deps


def _load_resolved(
    r: Resolved, *, backend, user_agent, trust_remote_code, check, chain=(), locked=None
) -> ModuleType:
    meta = r.meta or Metadata.read_from_file(r.variant_dir / "metadata.json")
    validate_metadata(meta, r.variant_dir)
    if check:
        verify_arch(meta, r.variant_dir)
    deps = _load_deps(
        meta,
        r.repo_id,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
        check=check,
        chain=chain,
        locked=locked,
    )
    return import_variant(r.variant_dir, RepoInfo(r.repo_id, r.commit), deps, meta)


def _get_kernel(repo_id, *, revision, version, backend, user_agent, trust_remote_code, check, chain=()):
    override = local_overrides().get(repo_id)
    if override is not None:
        return _load_local(
            find_local_variant(override, backend),
            backend=backend,
            user_agent=user_agent,
            trust_remote_code=trust_remote_code,
            check=check,
            chain=chain,
            repo_id=repo_id,
        )
    r = resolve_variant(
        repo_id,
        revision=revision,
        version=version,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
    )
    return _load_resolved(
        r,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
        check=check,
        chain=chain,
    )


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
    """Load `repo_id` at `version` (branch vN) or `revision`: download if needed, verify, import."""
    _check_args(
        repo_id, revision=revision, version=version, backend=backend, trust_remote_code=trust_remote_code
    )
    return _get_kernel(
        repo_id,
        revision=revision,
        version=version,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
        check=check_arch,
    )


def get_local_kernel(repo_path, *, backend=None, trust_remote_code=False, user_agent=None) -> ModuleType:
    """Load a kernel from a local directory (repo root, build/ folder or variant dir); metadata.json
    required."""
    if not isinstance(repo_path, (str, os.PathLike)):
        raise TypeError(
            f"repo_path must be a path (str or Path), got {type(repo_path).__name__} {repo_path!r}"
        )
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be a str such as 'cpu' or 'cuda', or None, got {backend!r}")
    return _load_local(
        find_local_variant(Path(repo_path), backend),
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
        check=True,
        chain=(),
        repo_id=str(repo_path),
    )


def _load_local(variant_dir: Path, *, backend, user_agent, trust_remote_code, check, chain, repo_id):
    meta = Metadata.read_from_file(variant_dir / "metadata.json")
    validate_metadata(meta, variant_dir)
    deps = _load_deps(
        meta,
        repo_id,
        backend=backend,
        user_agent=user_agent,
        trust_remote_code=trust_remote_code,
        check=check,
        chain=chain,
        locked=None,
    )
    return import_variant(variant_dir, None, deps, meta)


def has_kernel(
    repo_id: str, *, revision=None, version=None, backend=None, trust_remote_code=False, check_arch=True
) -> bool:
    """Whether a variant for this system exists, for the kernel and each of its kernel-depends. As in kernels,
    False for a FileNotFoundError (no variant fits; offline and not cached) or a failed arch check; other
    errors (untrusted publisher, unknown version, network) raise."""
    _check_args(
        repo_id, revision=revision, version=version, backend=backend, trust_remote_code=trust_remote_code
    )

    def locate(rid, rev, ver):
        r = resolve_variant(
            rid,
            revision=rev,
            version=ver,
            backend=backend,
            trust_remote_code=trust_remote_code,
            download=False,
        )
        if not (r.variant_dir / "metadata.json").is_file() and not offline():
            return Hub().download_file(rid, r.commit, f"build/{r.variant_dir.name}/metadata.json").parent
        return r.variant_dir

    visit = verify_arch if check_arch else None
    try:
        _walk_tree(repo_id, revision, version, backend=backend, locate=locate, visit=visit)
    except (FileNotFoundError, ArchMismatchError):  # NoCompatibleVariantError is a FileNotFoundError
        return False
    return True


def get_kernel_variants(
    repo_id: str, *, revision=None, version=None, backend=None
) -> list[VariantAccepted | VariantRejected]:
    """Every variant of the repo at that version/revision, accepted ones first (preferred first), each
    rejection with its reason."""
    _check_args(repo_id, revision=revision, version=version, backend=backend)
    hub = Hub()
    local_only = offline()
    commit = hub.resolve_commit(repo_id, revision, version, local_only=local_only)
    state = CommitState.load(repo_id, commit)
    names = state.variants
    if not names:
        snap = repo_cache(repo_id) / "snapshots" / commit / "build"
        names = _local_variant_names(snap) if local_only else hub.list_variants(repo_id, commit)
    return resolve(names, detect_system(backend))


@dataclass(frozen=True)
class _Locked:
    """A locked load in progress: every kernel of the tree is taken from `lock`."""

    lock: object  # locking.Lock
    backend: str | None
    local_only: bool
    trust_remote_code: object


def _load_locked(
    repo_id, lockfile, caller, *, backend, local_only, trust_remote_code, user_agent
) -> ModuleType:
    from .locking import read_lock

    check_repo_id(repo_id)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be a str such as 'cpu' or 'cuda', or None, got {backend!r}")
    lock = read_lock(lockfile, caller=caller)
    lock.find(repo_id)  # a LockError naming the lock file before anything else
    if trust_remote_code == "lock":  # load_kernel: the project's lock file is the trust decision
        trust_remote_code = [e.repo_id for e in lock.entries]
    trust_allows(repo_id, trust_remote_code)
    locked = _Locked(lock, backend, local_only, trust_remote_code)
    return _load_locked_entry(repo_id, locked, chain=(), user_agent=user_agent)


def _load_locked_entry(repo_id: str, locked: _Locked, *, chain, user_agent) -> ModuleType:
    from .locking import check_locked_variant

    entry = locked.lock.find(repo_id)
    r = resolve_variant(
        repo_id,
        revision=entry.commit,
        backend=locked.backend,
        local_files_only=locked.local_only,
        user_agent=user_agent,
        trust_remote_code=locked.trust_remote_code,
    )
    check_locked_variant(locked.lock, entry, r.variant_dir)
    return _load_resolved(
        r,
        backend=locked.backend,
        user_agent=user_agent,
        trust_remote_code=locked.trust_remote_code,
        check=True,
        chain=chain,
        locked=locked,
    )


def _caller():
    from .locking import _caller_module

    return _caller_module()


def get_locked_kernel(
    repo_id: str, *, lockfile: Path | None, trust_remote_code=False, user_agent=None
) -> ModuleType:
    """Load the commit locked for `repo_id` (downloading if needed); the variant must match its lock hash."""
    return _load_locked(
        repo_id,
        lockfile,
        _caller(),
        backend=None,
        local_only=False,
        trust_remote_code=trust_remote_code,
        user_agent=user_agent,
    )


def load_kernel(repo_id: str, *, lockfile: Path | None, backend=None) -> ModuleType:
    """Load the locked commit from the cache only (never downloads); the variant must match its lock hash. The
    project's lock file is the trust decision here: it pins a commit the project chose."""
    return _load_locked(
        repo_id,
        lockfile,
        _caller(),
        backend=backend,
        local_only=True,
        trust_remote_code="lock",
        user_agent=None,
    )
