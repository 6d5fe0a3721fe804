"""Signature enforcement on load: publishers listed in the trust file (docs/signing.md) get their variants'
`metadata.json.kforge-sig` checked before anything is imported; keys and signatures come from the real
`kforge key generate|sign`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_trees import make_variant
from kforge.loader import RepoInfo, import_variant
from kforge.signing import SignatureError

REPO = Path(__file__).resolve().parents[2]
KFORGE = Path(os.environ.get("KFORGE_BIN", REPO / "target" / "debug" / "kforge"))


def kforge(*args: str | Path) -> None:
    subprocess.run([str(KFORGE), *map(str, args)], check=True, capture_output=True, text=True)


@pytest.fixture
def keys(tmp_path):
    if not KFORGE.is_file():
        pytest.fail(f"kforge binary not found at {KFORGE}: run `cargo build -p kforge-cli` or set KFORGE_BIN")
    kforge("key", "generate", "--out", tmp_path / "acme.key")
    kforge("key", "generate", "--out", tmp_path / "other.key")
    return tmp_path / "acme.key", tmp_path / "other.key"


def variant(root: Path, ns: str) -> Path:
    return make_variant(
        root / "build" / "torch-universal",
        {"__init__.py": "LOADED = True\n"},
        name="signed-kernel",
        id_=ns,
    )


def trust(tmp_path, monkeypatch, public_key: Path, require: bool) -> None:
    line = public_key.read_text().strip()
    (tmp_path / "trust.toml").write_text(
        f'[publishers.acme]\nkeys = ["{line}"]\nrequire-signature = {str(require).lower()}\n'
    )
    monkeypatch.setenv("KFORGE_TRUST", str(tmp_path / "trust.toml"))


def test_signed_variant_loads_for_a_publisher_that_requires_signatures(tmp_path, monkeypatch, keys):
    acme, _ = keys
    trust(tmp_path, monkeypatch, acme.with_suffix(".key.pub"), require=True)
    d = variant(tmp_path / "signed", "_signed_kernel_ok")
    kforge("key", "sign", d, "--key", acme)
    module = import_variant(d, RepoInfo("acme/signed-kernel", "0" * 40))
    assert module.LOADED is True


def assert_refused_before_import(d, module_name):
    with pytest.raises(SignatureError):
        import_variant(d, RepoInfo("acme/signed-kernel", "0" * 40))
    assert module_name not in sys.modules


def test_unsigned_variant_is_refused_before_import(tmp_path, monkeypatch, keys):
    acme, _ = keys
    trust(tmp_path, monkeypatch, acme.with_suffix(".key.pub"), require=True)
    d = variant(tmp_path / "unsigned", "_signed_kernel_unsigned")
    assert_refused_before_import(d, "_signed_kernel_unsigned")


def test_variant_signed_with_an_untrusted_key_is_refused(tmp_path, monkeypatch, keys):
    acme, other = keys
    trust(tmp_path, monkeypatch, acme.with_suffix(".key.pub"), require=False)
    d = variant(tmp_path / "foreign", "_signed_kernel_foreign")
    kforge("key", "sign", d, "--key", other)
    assert_refused_before_import(d, "_signed_kernel_foreign")


def test_publishers_outside_the_trust_file_load_unsigned(tmp_path, monkeypatch, keys):
    acme, _ = keys
    trust(tmp_path, monkeypatch, acme.with_suffix(".key.pub"), require=True)
    d = variant(tmp_path / "elsewhere", "_signed_kernel_elsewhere")
    assert import_variant(d, RepoInfo("someone-else/kernel", "0" * 40)).LOADED is True
