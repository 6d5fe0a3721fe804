"""Variant grammar and selection against the shared vectors (tests/vectors/*.json)."""

import json
from pathlib import Path

import pytest
from kforge.variants import (
    Compute,
    System,
    VariantAccepted,
    VariantNameError,
    parse_variant,
    print_variant,
    resolve,
)

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"


def _system(d: dict) -> System:
    c = d["compute"]
    return System(
        d["torch"],
        d["cxx11"],
        Compute(c["type"], c.get("version")),
        d["cpu"],
        d["os"],
        tvm_ffi=d.get("tvm_ffi"),
        macos=d.get("macos"),
        free_threaded=d.get("free_threaded", False),
    )


SELECTION = json.loads((VECTORS / "selection.json").read_text())["selection"]


@pytest.mark.parametrize("case", SELECTION, ids=[c["name"] for c in SELECTION])
def test_selection_vectors(case):
    trace = resolve(case["offered"], _system(case["system"]))
    accepted = [r.name for r in trace if isinstance(r, VariantAccepted)]
    assert accepted == case["expected"]
    reasons = {r.name: r.reason for r in trace if not isinstance(r, VariantAccepted)}
    for name, fragment in case["rejected"].items():
        assert fragment in reasons[name], (name, reasons[name])
    # every parseable offered variant appears in the trace exactly once
    assert len(trace) == len({n for n in case["offered"] if n != "not-a-variant"})


# Builder-invalid names that a loader must still parse (reference §3.3: tagless Linux variants are
# accepted and sorted first; an ABI tag on a non-Linux OS parses, then the compatibility check rejects it).
LOADER_ACCEPTS = {"torch211-cu130-x86_64-linux", "torch212-cxx11-metal-aarch64-darwin"}


def test_loader_accepts_builder_invalid_names_then_checks_them():
    assert parse_variant("torch211-cu130-x86_64-linux").cxx11 is None
    darwin = System("2.12", None, Compute("metal"), "aarch64", "darwin", macos="26.1")
    (r,) = resolve(["torch212-cxx11-metal-aarch64-darwin"], darwin)
    assert "C++ ABI cxx11 != host ABI none" in r.reason


def _variants_vectors():
    path = VECTORS / "variants.json"
    if not path.exists():
        pytest.skip(f"{path} not written yet (owned by kforge-manifest)")
    return json.loads(path.read_text())


def test_variant_names_parse_and_print():
    vec = _variants_vectors()
    for entry in vec["names"]:
        v = parse_variant(entry["name"])
        assert print_variant(v) == entry["name"]
        kind = entry["kind"]
        assert v.kind == kind, entry
        if kind in ("torch", "stable-abi"):
            assert v.version == entry["torch"]
        if kind == "tvm-ffi":
            assert v.version == entry["tvm_ffi"]
        if kind == "torch":
            assert v.cxx11 == entry.get("cxx11")
        if "compute" in entry:
            assert v.compute == Compute(entry["compute"]["type"], entry["compute"].get("version"))
            assert (v.cpu, v.os) == (entry["cpu"], entry["os"])
        if kind == "noarch":
            assert v.backend == entry["backend"]
    for entry in vec.get("invalid_names", []):
        if entry["name"] in LOADER_ACCEPTS:
            continue
        with pytest.raises(VariantNameError):
            parse_variant(entry["name"])


def test_invalid_name_message_says_what_was_expected():
    with pytest.raises(VariantNameError, match="torch211-cxx11-cu130.*does not match"):
        parse_variant("torch211-cxx11-cu130")


@pytest.mark.parametrize(
    ("archs", "capability", "covered"),
    [
        (["8.0"], (8, 6), True),  # base X.Y: same major, device minor >= Y
        (["8.0"], (9, 0), False),
        (["9.0a"], (9, 0), True),  # arch-specific: exact capability only
        (["9.0a"], (9, 1), False),
        (["10.0f"], (10, 3), True),  # family: same major, minor >= Y
        (["10.0f"], (12, 0), False),
        (["8.0+PTX"], (12, 0), True),  # PTX: any capability >= X.Y
        (["8.0+PTX"], (7, 5), False),
        (["7.5", "9.0a"], (9, 0), True),
        (["sm_90", "weird"], (9, 0), None),  # nothing parses: treated as compatible
    ],
)
def test_cuda_arch_check_rules(archs, capability, covered):
    """reference §3.6, applied to metadata.backend.archs when a CUDA device is present."""
    from kforge.loader import _cuda_archs_cover

    assert _cuda_archs_cover(archs, *capability) is covered
