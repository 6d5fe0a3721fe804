"""Tampered variants are refused before their `.so` is mapped: a small run of the suite in
tamper_suite.py (bench/reliability.py runs 1000 flips)."""

from __future__ import annotations

import pytest
import tamper_suite

FLIPS = 50


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    work = tmp_path_factory.mktemp("tamper")
    unsigned, _ = tamper_suite.build_variant(work / "unsigned", sign=False)
    signed, key = tamper_suite.build_variant(work / "signed", sign=True)
    return work, unsigned, signed, key


def _control(variant):
    # Mask 0 changes nothing: the pristine copy must load, or the suite could not tell refusal from failure.
    return {"file": "metadata.json", "offset": 0, "mask": 0}


def test_signed_variant_every_flip_refused_before_dlopen(variants):
    work, _, signed, key = variants
    flips = [_control(signed), *tamper_suite.plan_flips(signed, FLIPS, seed=20261203)]
    r = tamper_suite.run_flips(signed, flips, work / "flips-signed", trusted_key=key)
    assert r.flips == FLIPS + 1
    assert [x["index"] for x in r.loaded] == [0], r.loaded
    assert r.refused == FLIPS
    assert r.refused_clear == FLIPS, r.unclear
    assert r.mapped_before_refusal == []
    # Every kind of file was hit, including metadata.json and the signature file.
    assert {"metadata.json", "metadata.json.kforge-sig", "__init__.py", "_ops.py"} <= set(r.by_file)
    assert any(f.endswith(".abi3.so") for f in r.by_file)


def test_digest_alone_refuses_every_flip_of_a_digested_file(variants):
    work, unsigned, _, _ = variants
    flips = [f for f in tamper_suite.plan_flips(unsigned, 2 * FLIPS, seed=7) if f["file"] != "metadata.json"]
    r = tamper_suite.run_flips(unsigned, flips[:FLIPS], work / "flips-digest", trusted_key=None)
    assert r.flips == FLIPS
    assert r.loaded == []
    assert r.refused_clear == FLIPS, r.unclear
    assert r.errors == {"DigestMismatchError": FLIPS}
    assert r.mapped_before_refusal == []


def test_wrong_key_refuses_a_pristine_signed_variant(variants):
    work, _, signed, _ = variants
    r = tamper_suite.run_flips(signed, [_control(signed)], work / "wrong-key", trusted_key=bytes(range(32)))
    assert r.loaded == []
    assert r.errors == {"SignatureError": 1}
    assert r.mapped_before_refusal == []


def test_injected_bytecode_does_not_run(variants):
    work, _, signed, key = variants
    assert not tamper_suite.pyc_injection_runs(signed, work / "pyc", trusted_key=key)
