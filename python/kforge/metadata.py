"""`build/<variant>/metadata.json`: parsing with per-key errors, and the per-file digest check run on every
load."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DigestMismatchError, MetadataError

# Files a digest never covers: metadata.json and the signatures of its bytes (reference §5.1; kforge.signing).
_EXCLUDED_TOP = {"metadata.json", "metadata.json.sigstore", "metadata.json.kforge-sig"}
_NAME = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
BACKEND_TYPES = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")


@dataclass(frozen=True)
class Backend:
    backend_type: str
    archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelDependency:
    """One `kernel-depends` entry: a repo and exactly one of version (branch vN) or revision."""

    repo_id: str
    version: int | None = None
    revision: str | None = None


@dataclass(frozen=True)
class Metadata:
    id: str
    name: str
    version: int | None = None
    license: str | None = None
    backend: Backend | None = None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    kernels_minver: str | None = None
    upstream: str | None = None
    source: str | None = None
    digest: dict | None = None
    provenance: dict | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    @property
    def dirty(self) -> bool:
        kernel = (self.provenance or {}).get("kernel") or {}
        return bool(kernel.get("dirty"))

    @classmethod
    def read_from_file(cls, path: Path) -> Metadata:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if path.is_symlink():  # an HF cache snapshot link whose blob is gone
                raise MetadataError(
                    f"{path}: broken link (its blob {os.readlink(path)} is missing from the cache); delete "
                    "the cached variant and download it again"
                ) from None
            raise MetadataError(
                f"{path}: missing; every kernel variant needs a metadata.json (rebuild it with `kforge "
                "build`)"
            ) from None
        except OSError as e:
            raise MetadataError(
                f"{path}: cannot read it ({e.strerror or e}); expected a metadata.json file"
            ) from None
        return cls.from_bytes(raw, where=str(path))

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = "metadata.json") -> Metadata:
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise MetadataError(
                f"{where}: not valid JSON ({e}); rebuild or re-download the variant"
            ) from None
        if not isinstance(data, dict):
            raise MetadataError(f"{where}: expected a JSON object at top level, got {type(data).__name__}")

        def bad(key: str, expected: str) -> MetadataError:
            return MetadataError(f"{where}: key {key!r} must be {expected}, got {data.get(key)!r}")

        for key in ("id", "name"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise bad(key, "a non-empty string")
        if not _NAME.match(data["name"]):
            raise bad("name", "lowercase letters, digits and '-' (regex ^[a-z][-a-z0-9]*[a-z0-9]$)")
        version = data.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise bad("version", "an integer major version")
        for key in ("license", "kernels-minver", "upstream", "source"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise bad(key, "a string")
        py_deps = data.get("python-depends") or []
        if not isinstance(py_deps, list) or not all(isinstance(d, str) for d in py_deps):
            raise bad("python-depends", "a list of package names")
        backend = None
        b = data.get("backend")
        if b is not None:
            if not isinstance(b, dict) or b.get("type") not in BACKEND_TYPES:
                raise bad("backend", f"an object with 'type' one of {', '.join(BACKEND_TYPES)}")
            archs = b.get("archs") or []
            if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
                raise MetadataError(f"{where}: key 'backend.archs' must be a list of strings, got {archs!r}")
            backend = Backend(b["type"], tuple(archs))
        digest = data.get("digest")
        if digest is not None and (
            not isinstance(digest, dict)
            or not isinstance(digest.get("files"), dict)
            or "algorithm" not in digest
        ):
            raise bad("digest", "an object {algorithm, files: {path: base64 hash}}")
        return cls(
            id=data["id"],
            name=data["name"],
            version=version,
            license=data.get("license"),
            backend=backend,
            python_depends=tuple(py_deps),
            kernel_depends=tuple(_kernel_deps(data.get("kernel-depends"), where)),
            kernels_minver=data.get("kernels-minver"),
            upstream=data.get("upstream"),
            source=data.get("source"),
            digest=digest,
            provenance=data.get("provenance") if isinstance(data.get("provenance"), dict) else None,
            raw=data,
        )


def _kernel_deps(value, where: str) -> list[KernelDependency]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MetadataError(f"{where}: key 'kernel-depends' must be a list, got {value!r}")
    out = []
    for i, dep in enumerate(value):
        ok = isinstance(dep, dict) and isinstance(dep.get("repo-id"), str)
        version = dep.get("version") if ok else None
        has_version = isinstance(version, int) and not isinstance(version, bool) and version >= 0
        if ok and "version" in dep and not has_version:
            ok = False  # e.g. "version": true or "1": exactly one of the two, each of its type
        has_revision = isinstance(dep.get("revision"), str) if ok else False
        if not ok or has_version == has_revision:
            raise MetadataError(
                f"{where}: kernel-depends[{i}] must be {{'repo-id': str, and exactly one of 'version': int "
                f"or 'revision': str}}, got {dep!r}"
            )
        out.append(KernelDependency(dep["repo-id"], dep.get("version"), dep.get("revision")))
    return out


def digest_files(variant_dir: Path) -> list[str]:
    """Relative paths a digest covers: every file except top-level metadata.json(.sigstore), .pyc,
    __pycache__."""
    out = []
    for root, dirs, files in os.walk(variant_dir, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel_root = Path(root).relative_to(variant_dir)
        for f in files:
            rel = (rel_root / f).as_posix()
            if rel in _EXCLUDED_TOP or f.endswith(".pyc"):
                continue
            out.append(rel)
    return sorted(out)


def file_hash(path: Path, algorithm: str = "sha256") -> bytes:
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:  # open() follows symlinks into the HF blob store
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.digest()


def compute_digest(variant_dir: Path, algorithm: str = "sha256") -> dict[str, str]:
    """base64(std) hash of every covered file, keyed by `/`-separated relative path."""
    return {
        rel: base64.b64encode(file_hash(variant_dir / rel, algorithm)).decode()
        for rel in digest_files(variant_dir)
    }


def stamp(variant_dir: Path) -> list | None:
    """(path, size, mtime, ctime, inode) of every file of the variant: any write changes ctime, so a matching
    stamp means the bytes that were verified are still the bytes on disk. None when a file cannot be stat'ed
    (e.g. a snapshot link whose blob is gone): then nothing is taken as verified."""
    out = []
    for rel in ["metadata.json", *digest_files(variant_dir)]:
        try:
            s = os.stat(variant_dir / rel)
        except OSError:
            return None
        out.append([rel, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino])
    return out


def _unreadable(path: Path) -> str | None:
    """Why `path` (listed in the variant dir) cannot be hashed, or None if it can be read."""
    try:
        with open(path, "rb"):
            return None
    except OSError as e:
        if path.is_symlink() and not path.exists():
            return f"broken link {path} (its blob {os.readlink(path)} is missing from the cache)"
        return f"unreadable file {path} ({e.strerror or e})"


# In-process memo: variant dir -> stamp of the last successful verification.
_verified: dict[Path, list] = {}


def verify_digest(variant_dir: Path, meta: Metadata, *, known_stamp: list | None = None) -> list | None:
    """Check the variant's files against `meta.digest` as a set; raise DigestMismatchError naming each bad
    file.

    Skips hashing when the files' stamp equals the in-process memo or `known_stamp` (a stamp persisted by an
    earlier process). Returns the stamp that was verified, or None when the metadata has no digest.
    """
    variant_dir = Path(variant_dir)
    md = variant_dir / "metadata.json"
    if meta.digest is None:
        return None
    current = stamp(variant_dir)
    if current is not None and (
        _verified.get(variant_dir) == current or (known_stamp is not None and known_stamp == current)
    ):
        _verified[variant_dir] = current
        return current
    _verified.pop(variant_dir, None)
    algorithm = meta.digest.get("algorithm")
    if algorithm not in ("sha256", "sha512"):
        raise DigestMismatchError(f"{md}: digest.algorithm must be 'sha256' or 'sha512', got {algorithm!r}")
    expected = meta.digest["files"]
    problems = [p for p in map(_unreadable, (variant_dir / r for r in digest_files(variant_dir))) if p]
    if problems:
        raise DigestMismatchError(
            f"refusing to load {variant_dir}: some of its files cannot be read:\n  "
            + "\n  ".join(problems)
            + "\nDelete the cached variant and download it again, or rebuild it."
        )
    actual = compute_digest(variant_dir, algorithm)
    for rel in sorted(set(expected) | set(actual)):
        if rel not in actual:
            problems.append(f"missing file {variant_dir / rel}")
        elif rel not in expected:
            problems.append(f"unknown file {variant_dir / rel} (not listed in the digest)")
        elif expected[rel] != actual[rel]:
            problems.append(f"hash mismatch {variant_dir / rel}: expected {expected[rel]}, got {actual[rel]}")
    if problems:
        raise DigestMismatchError(
            f"refusing to load {variant_dir}: its files do not match the digest in {md}:\n  "
            + "\n  ".join(problems)
            + "\nDelete the cached variant and download it again, or rebuild it."
        )
    _verified[variant_dir] = current
    return current
