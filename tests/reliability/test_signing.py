"""python/kforge/signing.py against signatures and keys made by the Rust `kforge key` commands."""

from __future__ import annotations

import json
import subprocess

import pytest
import tamper_suite
from kforge import signing
from kforge.errors import KernelError

META = {
    "name": "relu",
    "id": "_relu_cpu_0123abc",
    "version": 1,
    "license": "MIT",
    "python-depends": [],
    "kernel-depends": [],
    "backend": {"type": "cpu"},
}


def kforge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(tamper_suite.kforge_bin()), *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def signed(tmp_path):
    """A variant dir (with a digest, made by the loader's own digest code) signed by `kforge key sign`."""
    from kforge.metadata import compute_digest

    variant = tmp_path / "build" / "torch211-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("x = 1\n")
    (variant / "_relu_cpu_0123abc.abi3.so").write_bytes(b"\x7fELF" + bytes(100))
    meta = dict(META, digest={"algorithm": "sha256", "files": compute_digest(variant)})
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    key = tmp_path / "key"
    assert kforge("key", "generate", "--out", str(key)).returncode == 0
    done = kforge("key", "sign", str(tmp_path), "--key", str(key))
    assert done.returncode == 0, done.stderr
    public = signing.parse_public_key((tmp_path / "key.pub").read_text())
    return variant, public, tmp_path


def test_rust_signature_verifies_in_python(signed):
    variant, public, _ = signed
    assert signing.verify_variant_signature(variant, [bytes(32), public]) is None
    sig = json.loads((variant / signing.SIG_FILE).read_text())
    assert sig["key-id"] == signing.key_id(public)
    assert list(sig) == ["algorithm", "key-id", "signed-file", "signed-sha256", "signature"]


def test_python_refuses_what_rust_refuses(signed):
    variant, public, tmp = signed
    other = tmp / "other"
    assert kforge("key", "generate", "--out", str(other)).returncode == 0
    other_pub = signing.parse_public_key((tmp / "other.pub").read_text())
    with pytest.raises(signing.SignatureError, match="not trusted"):
        signing.verify_variant_signature(variant, [other_pub])

    md = variant / "metadata.json"
    original = md.read_bytes()
    md.write_bytes(original.replace(b'"MIT"', b'"BSD"'))
    with pytest.raises(signing.SignatureError, match="changed after signing"):
        signing.verify_variant_signature(variant, [public])
    # Both implementations agree on the same tampered directory.
    assert kforge("verify", str(variant), "--require-signature").returncode != 0
    md.write_bytes(original)

    sig_path = variant / signing.SIG_FILE
    good = sig_path.read_text()
    sig_path.write_text(good.replace("\n  ", "\n   "))
    with pytest.raises(signing.SignatureError, match="canonical"):
        signing.verify_variant_signature(variant, [public])
    fields = json.loads(good)
    b64 = fields["signature"]
    flipped = b64[:10] + ("A" if b64[10] != "A" else "B") + b64[11:]
    sig_path.write_text(good.replace(fields["signature"], flipped))
    with pytest.raises(signing.SignatureError, match="does not verify"):
        signing.verify_variant_signature(variant, [public])
    sig_path.unlink()
    with pytest.raises(signing.SignatureError, match="is not signed"):
        signing.verify_variant_signature(variant, [public])
    assert issubclass(signing.SignatureError, KernelError)


def test_trust_file(tmp_path, monkeypatch, signed):
    _, public, tmp = signed
    line = (tmp / "key.pub").read_text().strip()
    trust = tmp_path / "trust.toml"
    trust.write_text(
        f'[publishers.acme]\nkeys = ["{line}"]\n\n[publishers.lab]\nkeys = ["{line}"]\n'
        "require-signature = false\n"
    )
    parsed = signing.load_trust(trust)
    assert parsed["acme"] == signing.TrustedPublisher([public], True)
    assert parsed["lab"].require_signature is False
    monkeypatch.setenv("KFORGE_TRUST", str(trust))
    assert signing.load_trust() == parsed
    monkeypatch.setenv("KFORGE_TRUST", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nowhere"))
    assert signing.load_trust() == {}
    with pytest.raises(signing.TrustFileError, match="trust file not found"):
        signing.load_trust(tmp_path / "missing.toml")
    for text, match in [
        ("[publishers.x]\nkeys = []\n", "non-empty list"),
        ('[publishers.x]\nkeys = ["kforge-ed25519 !!"]\n', "not base64"),
        ('[publishers.x]\nkeys = ["kforge-ed25519 AAAA"]\n', "expected 32"),
        ('[publishers.x]\nkey = ["a"]\n', "publishers.x"),
        ("[publishers.x\n", "invalid trust file"),
        ("trusted = 1\n", "unknown top-level"),
    ]:
        trust.write_text(text)
        with pytest.raises(signing.TrustFileError, match=match):
            signing.load_trust(trust)


def test_enforce_trust_follows_the_publisher_entry(signed):
    variant, public, _ = signed
    acme = signing.TrustedPublisher([public], True)
    lab = signing.TrustedPublisher([bytes(32)], False)
    trust = {"acme": acme, "lab": lab}
    assert signing.enforce_trust("acme/relu", variant, trust) is True
    # A publisher whose keys did not sign it is refused, even if it does not require signatures.
    with pytest.raises(signing.SignatureError, match="not trusted"):
        signing.enforce_trust("lab/relu", variant, trust)
    assert signing.enforce_trust("stranger/relu", variant, trust) is False
    (variant / signing.SIG_FILE).unlink()
    with pytest.raises(signing.SignatureError, match="is not signed"):
        signing.enforce_trust("acme/relu", variant, trust)
    assert signing.enforce_trust("lab/relu", variant, trust) is False
