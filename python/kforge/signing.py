"""Verify `metadata.json.kforge-sig`, the ed25519 signature that `kforge key sign` writes beside a variant's
metadata.json (format in docs/signing.md), and read the trust file that maps publishers to public keys.

The signature covers the exact bytes of metadata.json, whose digest covers every other file, so a variant
whose signature verifies and whose files match the digest is byte-for-byte what the key holder signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import KernelError

SIG_FILE = "metadata.json.kforge-sig"
ALGORITHM = "ed25519"
PUBLIC_TAG = "kforge-ed25519"
_CONTEXT = b"kforge-sig-v1\n"
_FIELDS = ("algorithm", "key-id", "signed-file", "signed-sha256", "signature")


class SignatureError(KernelError, RuntimeError):
    """A variant's signature is missing, malformed, made by an untrusted key, or does not verify."""


class TrustFileError(KernelError, ValueError):
    """The trust file does not parse or names a malformed key."""


@dataclass(frozen=True)
class TrustedPublisher:
    keys: list[bytes]
    require_signature: bool


def key_id(public_key: bytes) -> str:
    """First 16 hex digits of sha256(public key): the `key-id` written in signature files."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def parse_public_key(line: str, where: str = "public key") -> bytes:
    """The 32 raw bytes of a `kforge-ed25519 <base64> [comment]` line (the content of KEY.pub)."""
    words = line.split()
    if len(words) < 2 or words[0] != PUBLIC_TAG:
        raise TrustFileError(
            f"{where}: expected `{PUBLIC_TAG} <base64> [comment]` (a KEY.pub line), got {line!r}"
        )
    try:
        raw = base64.b64decode(words[1], validate=True)
    except binascii.Error as e:
        raise TrustFileError(f"{where}: the public key is not base64 ({e})") from None
    if len(raw) != 32:
        raise TrustFileError(f"{where}: the public key decodes to {len(raw)} bytes; expected 32")
    return raw


def default_trust_path() -> Path:
    """$KFORGE_TRUST, else $XDG_CONFIG_HOME/kforge/trust.toml, else ~/.config/kforge/trust.toml."""
    if os.environ.get("KFORGE_TRUST"):
        return Path(os.environ["KFORGE_TRUST"])
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "kforge" / "trust.toml"


def load_trust(path: Path | None = None) -> dict[str, TrustedPublisher]:
    """Publisher -> keys from a trust file; an absent default file means no publishers."""
    explicit = path is not None
    path = Path(path) if explicit else default_trust_path()
    if not path.exists():
        if explicit:
            raise TrustFileError(f"{path}: trust file not found")
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TrustFileError(f"{path}: invalid trust file: {e}") from None
    unknown = set(data) - {"publishers"}
    if unknown:
        raise TrustFileError(
            f"{path}: unknown top-level key(s) {sorted(unknown)}; expected [publishers.<org>]"
        )
    out = {}
    for name, entry in data.get("publishers", {}).items():
        where = f"{path}: publishers.{name}"
        if not isinstance(entry, dict) or set(entry) - {"keys", "require-signature"}:
            raise TrustFileError(f"{where}: expected a table with `keys` and optional `require-signature`")
        keys = entry.get("keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise TrustFileError(f"{where}.keys: expected a non-empty list of KEY.pub lines")
        require = entry.get("require-signature", True)
        if not isinstance(require, bool):
            raise TrustFileError(f"{where}.require-signature: expected true or false")
        out[name] = TrustedPublisher([parse_public_key(k, f"{where}.keys") for k in keys], require)
    return out


def _canonical(fields: dict) -> bytes:
    # The bytes `kforge key sign` writes (serde_json pretty form): any other byte sequence is refused.
    return (json.dumps({k: fields[k] for k in _FIELDS}, indent=2, ensure_ascii=False) + "\n").encode()


def verify_variant_signature(variant_dir: Path, trusted_keys: list[bytes]) -> None:
    """Verify `variant_dir/metadata.json` against `variant_dir/metadata.json.kforge-sig` with one of
    `trusted_keys` (32-byte ed25519 public keys). Raises SignatureError naming the file and the problem.

    This covers metadata.json only; the loader's digest check covers the other files."""
    variant_dir = Path(variant_dir)
    sig_path = variant_dir / SIG_FILE
    if not sig_path.is_file():
        raise SignatureError(
            f"{variant_dir} is not signed (no {SIG_FILE}); its publisher requires signatures"
        )
    raw = sig_path.read_bytes()
    try:
        fields = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SignatureError(f"{sig_path}: not a kforge signature file: {e}") from None
    if not isinstance(fields, dict) or set(fields) != set(_FIELDS):
        raise SignatureError(f"{sig_path}: expected exactly the fields {', '.join(_FIELDS)}")
    if not all(isinstance(fields[k], str) for k in _FIELDS):
        raise SignatureError(f"{sig_path}: every field must be a string")
    if fields["algorithm"] != ALGORITHM:
        raise SignatureError(f"{sig_path}: algorithm is {fields['algorithm']!r}; expected {ALGORITHM!r}")
    if fields["signed-file"] != "metadata.json":
        raise SignatureError(
            f"{sig_path}: signed-file is {fields['signed-file']!r}; expected 'metadata.json'"
        )
    if _canonical(fields) != raw:
        raise SignatureError(
            f"{sig_path}: not in canonical form (edited after signing); sign the variant again"
        )
    try:
        signature = base64.b64decode(fields["signature"], validate=True)
    except binascii.Error as e:
        raise SignatureError(f"{sig_path}: signature is not base64 ({e})") from None
    if len(signature) != 64:
        raise SignatureError(f"{sig_path}: signature is {len(signature)} bytes; expected 64")
    key = next((k for k in trusted_keys if key_id(k) == fields["key-id"]), None)
    if key is None:
        trusted = ", ".join(key_id(k) for k in trusted_keys) or "none"
        raise SignatureError(
            f"{sig_path}: signed by key {fields['key-id']}, which is not trusted (trusted: {trusted}); "
            "add the signer's KEY.pub line to the trust file if you trust it"
        )
    sha = hashlib.sha256((variant_dir / "metadata.json").read_bytes()).digest()
    if sha.hex() != fields["signed-sha256"]:
        raise SignatureError(
            f"{sig_path}: metadata.json has sha256 {sha.hex()} but the signature was made over "
            f"{fields['signed-sha256']}: metadata.json changed after signing"
        )
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        raise SignatureError(
            f"cannot check {sig_path}: verifying signatures needs the `cryptography` package "
            "(pip install cryptography)"
        ) from None
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature, _CONTEXT + sha)
    except (InvalidSignature, ValueError):
        raise SignatureError(
            f"{sig_path}: the ed25519 signature does not verify with key {fields['key-id']}"
        ) from None


def enforce_trust(repo_id: str, variant_dir: Path, trust: dict[str, TrustedPublisher] | None = None) -> bool:
    """The loader's rule for `repo_id`'s publisher (its namespace) in the trust file: a signed variant must
    verify with one of the publisher's keys; an unsigned one is refused when the publisher requires
    signatures. Publishers not in the trust file are left to the loader's other checks. Returns whether a
    signature was verified. Call it before importing anything from `variant_dir`."""
    trust = load_trust() if trust is None else trust
    publisher = trust.get(repo_id.split("/", 1)[0])
    if publisher is None:
        return False
    if not (Path(variant_dir) / SIG_FILE).is_file() and not publisher.require_signature:
        return False
    verify_variant_signature(variant_dir, publisher.keys)
    return True
