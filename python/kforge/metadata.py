"""`build/<variant>/metadata.json`: parsing and the per-file digest check done on every load."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

_EXCLUDED_TOP = {"metadata.json", "metadata.json.sigstore"}


class MetadataError(ValueError):
    """metadata.json is missing, does not parse, or lacks a required key."""


class DigestMismatchError(RuntimeError):
    """A variant's files do not match the digest in its metadata.json."""


@dataclass(frozen=True)
class Backend:
    backend_type: str
    archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Metadata:
    id: str
    name: str
    version: int | None
    license: str | None
    backend: Backend | None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[dict, ...] = ()
    digest: dict | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    @classmethod
    def read_from_file(cls, path: Path) -> Metadata:
        try:
            data = json.loads(Path(path).read_bytes())
        except FileNotFoundError:
            raise MetadataError(f"{path}: missing; every kernel variant needs a metadata.json") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise MetadataError(f"{path}: not valid JSON ({e}); rebuild or re-download the variant") from None
        if not isinstance(data, dict):
            raise MetadataError(f"{path}: expected a JSON object at top level")
        for key in ("id", "name"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise MetadataError(f"{path}: key {key!r} must be a non-empty string")
        b = data.get("backend")
        backend = None
        if isinstance(b, dict) and isinstance(b.get("type"), str):
            backend = Backend(b["type"], tuple(b.get("archs") or ()))
        return cls(
            id=data["id"],
            name=data["name"],
            version=data.get("version"),
            license=data.get("license"),
            backend=backend,
            python_depends=tuple(data.get("python-depends") or ()),
            kernel_depends=tuple(data.get("kernel-depends") or ()),
            digest=data.get("digest"),
            raw=data,
        )


def _digest_files(variant_dir: Path) -> list[str]:
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


def compute_digest(variant_dir: Path, algorithm: str = "sha256") -> dict[str, str]:
    """base64(std) hash of every covered file, keyed by `/`-separated relative path."""
    result = {}
    for rel in _digest_files(variant_dir):
        h = hashlib.new(algorithm)
        with open(variant_dir / rel, "rb") as fh:  # open() follows symlinks into the HF blob store
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        result[rel] = base64.b64encode(h.digest()).decode()
    return result


# (path, size, mtime_ns, inode) of every verified file, per variant dir: re-hash only what changed.
_verified: dict[Path, tuple] = {}


def _stamp(variant_dir: Path) -> tuple:
    st = []
    for rel in ["metadata.json", *_digest_files(variant_dir)]:
        s = os.stat(variant_dir / rel)
        st.append((rel, s.st_size, s.st_mtime_ns, s.st_ino))
    return tuple(st)


def verify_digest(variant_dir: Path, meta: Metadata, *, require: bool = False) -> None:
    """Check the variant against `meta.digest` as a set; raise DigestMismatchError naming each bad file."""
    variant_dir = Path(variant_dir)
    md = variant_dir / "metadata.json"
    if meta.digest is None:
        if require:
            raise DigestMismatchError(f"{md}: has no 'digest'; rebuild with kforge build to add one")
        return
    stamp = _stamp(variant_dir)
    if _verified.get(variant_dir) == stamp:
        return
    algorithm = meta.digest.get("algorithm")
    if algorithm not in ("sha256", "sha512"):
        raise DigestMismatchError(f"{md}: digest.algorithm must be 'sha256' or 'sha512', got {algorithm!r}")
    expected = meta.digest.get("files")
    if not isinstance(expected, dict):
        raise DigestMismatchError(f"{md}: digest.files must be an object of path -> base64 hash")
    actual = compute_digest(variant_dir, algorithm)
    problems = []
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
    _verified[variant_dir] = stamp
