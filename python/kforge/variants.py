"""Variant names (HF grammar), host description, compatibility checks and preference order (reference §3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NOARCH_BACKENDS = ("cpu", "cuda", "rocm", "metal", "xpu", "npu", "neuron", "tpu")
_COMPUTE = re.compile(r"^(?:(cpu|metal|neuron|tpu)|(cu|rocm|xpu|cann)(\d+))$")
_ARCH = re.compile(
    r"^(torch-stable-abi|torch|tvm-ffi)(\d)(\d+)(?:-(cxx11|cxx98))?-([a-z0-9]+)-([a-z0-9_]+)-([a-z]+)$"
)
KNOWN_CPUS = ("x86_64", "aarch64")
KNOWN_OSES = ("linux", "darwin", "windows")
_TYPE_OF_PREFIX = {"cu": "cuda", "rocm": "rocm", "xpu": "xpu", "cann": "npu"}


@dataclass(frozen=True)
class Compute:
    type: str
    version: str | None = None  # "13.0", "7.1", "2025.3"; None for cpu/metal


def _split_version(prefix: str, digits: str) -> str:
    # xpu encodes a 4-digit year then the minor; the others put the major first, minor is the last digit.
    if prefix == "xpu":
        return f"{digits[:4]}.{digits[4:]}"
    return f"{digits[:-1]}.{digits[-1]}"


def parse_compute(token: str) -> Compute | None:
    m = _COMPUTE.match(token)
    if not m:
        return None
    if m.group(1):
        return Compute(m.group(1))
    prefix, digits = m.group(2), m.group(3)
    if len(digits) < 2 or (prefix == "xpu" and len(digits) < 5):
        return None
    return Compute(_TYPE_OF_PREFIX[prefix], _split_version(prefix, digits))


def print_compute(c: Compute) -> str:
    if c.version is None:
        return c.type
    major, minor = c.version.split(".")
    prefix = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "npu": "cann"}[c.type]
    return f"{prefix}{major}{minor}"


@dataclass(frozen=True)
class Variant:
    """A parsed `build/<name>` directory name."""

    name: str
    kind: str  # torch | stable-abi | tvm-ffi | noarch | universal
    version: str | None = None  # torch / stable-abi / tvm-ffi major.minor
    cxx11: bool | None = None  # None: no ABI tag
    compute: Compute | None = None
    cpu: str | None = None
    os: str | None = None
    backend: str | None = None  # noarch backend


class VariantNameError(ValueError):
    pass


def parse_variant(name: str) -> Variant:
    """Parse a variant directory name; raise VariantNameError saying what was expected."""
    if name == "torch-universal":
        return Variant(name, "universal")
    if name.startswith("torch-") and name[6:] in NOARCH_BACKENDS:
        return Variant(name, "noarch", backend=name[6:])
    m = _ARCH.match(name)
    if not m:
        raise VariantNameError(
            f"variant name {name!r} does not match torch{{M}}{{m}}[-cxx11|-cxx98]-<compute>-<cpu>-<os>, "
            "torch-stable-abi{M}{m}-…, tvm-ffi{M}{m}-…, torch-<backend> or torch-universal"
        )
    fw, major, minor, abi, compute_tok, cpu, os_ = m.groups()
    compute = parse_compute(compute_tok)
    if compute is None:
        raise VariantNameError(f"variant name {name!r}: unknown compute token {compute_tok!r}")
    if cpu not in KNOWN_CPUS or os_ not in KNOWN_OSES:
        raise VariantNameError(
            f"variant name {name!r}: CPU must be one of {KNOWN_CPUS} and OS one of {KNOWN_OSES}, got "
            f"{cpu}-{os_}"
        )
    kind = {"torch": "torch", "torch-stable-abi": "stable-abi", "tvm-ffi": "tvm-ffi"}[fw]
    if abi is not None and kind != "torch":
        raise VariantNameError(f"variant name {name!r}: only torch{{M}}{{m}} variants carry an ABI tag")
    cxx11 = None if abi is None else abi == "cxx11"
    return Variant(name, kind, f"{major}.{minor}", cxx11, compute, cpu, os_)


def print_variant(v: Variant) -> str:
    if v.kind == "universal":
        return "torch-universal"
    if v.kind == "noarch":
        return f"torch-{v.backend}"
    assert v.version and v.compute
    prefix = {"torch": "torch", "stable-abi": "torch-stable-abi", "tvm-ffi": "tvm-ffi"}[v.kind]
    ver = v.version.replace(".", "")
    abi = "" if v.cxx11 is None else ("-cxx11" if v.cxx11 else "-cxx98")
    return f"{prefix}{ver}{abi}-{print_compute(v.compute)}-{v.cpu}-{v.os}"


@dataclass(frozen=True)
class System:
    """What the host offers: torch/tvm-ffi versions, ABI, backend, CPU, OS."""

    torch: str | None  # major.minor
    cxx11: bool | None  # None off Linux
    compute: Compute
    cpu: str
    os: str
    tvm_ffi: str | None = None
    macos: str | None = None
    free_threaded: bool = False
    forced_cpu: bool = False  # backend="cpu" was passed

    def describe(self) -> str:
        parts = [f"torch {self.torch or 'absent'}", f"cxx11={self.cxx11}", print_compute(self.compute)]
        parts += [f"{self.cpu}-{self.os}"]
        if self.tvm_ffi:
            parts.append(f"tvm-ffi {self.tvm_ffi}")
        return ", ".join(parts)


@dataclass(frozen=True)
class VariantAccepted:
    variant: Variant
    name: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "name", self.variant.name)


@dataclass(frozen=True)
class VariantRejected:
    variant: Variant
    reason: str
    name: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "name", self.variant.name)


def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def reject_reason(v: Variant, s: System) -> str | None:
    """None if `v` runs on `s`, else why not (reference §3.4)."""
    host_backend = s.compute.type
    if v.kind == "universal":
        return None
    if v.kind == "noarch":
        if v.backend == host_backend:
            return None
        return f"noarch backend {v.backend} != host backend {host_backend}"
    if s.free_threaded:
        return "free-threaded Python cannot load abi3 extensions"
    if v.cpu != s.cpu:
        return f"CPU {v.cpu} != host CPU {s.cpu}"
    if v.os != s.os:
        return f"OS {v.os} != host OS {s.os}"
    if v.kind == "torch":
        if s.torch is None:
            return "torch is not installed"
        if v.version != s.torch:
            return f"torch {v.version} != installed torch {s.torch}"
        if v.cxx11 is not None and v.cxx11 != s.cxx11:
            want = {True: "cxx11", False: "cxx98", None: "none (not Linux)"}[s.cxx11]
            return f"C++ ABI {'cxx11' if v.cxx11 else 'cxx98'} != host ABI {want}"
    elif v.kind == "stable-abi":
        if s.torch is None:
            return "torch is not installed"
        if _vt(v.version) > _vt(s.torch):
            return f"stable ABI {v.version} is newer than installed torch {s.torch}"
    elif v.kind == "tvm-ffi":
        if s.tvm_ffi is None:
            return "tvm-ffi is not installed"
        if v.version != s.tvm_ffi:
            return f"tvm-ffi {v.version} != installed tvm-ffi {s.tvm_ffi}"
    vc, hc = v.compute, s.compute
    if vc.type == "cuda" and hc.type == "cuda":
        (vM, vm), (hM, hm) = _vt(vc.version), _vt(hc.version)
        if vM != hM:
            return f"CUDA {vc.version} has another major version than host CUDA {hc.version}"
        if vm > hm:
            return f"CUDA {vc.version} is newer than host CUDA {hc.version}"
    elif vc != hc:
        if vc.type == "cpu" and hc.type != "cpu":
            return f"CPU build on a {print_compute(hc)} host (pass backend='cpu' to use it)"
        return f"backend {print_compute(vc)} != host backend {print_compute(hc)}"
    if vc.type == "metal" and (s.macos is None or _vt(s.macos)[:1] < (26,)):
        return f"Metal builds need macOS >= 26.0 (host: {s.macos or 'not macOS'})"
    return None


def _sort_key(v: Variant) -> tuple:
    minor = -_vt(v.compute.version)[-1] if v.compute is not None and v.compute.version else 0
    if v.kind == "stable-abi":
        return (0, tuple(-x for x in _vt(v.version)), minor)
    if v.kind == "torch":
        return (1, 0 if v.cxx11 is None else 1, minor)
    if v.kind == "tvm-ffi":
        return (2, 0, minor)
    if v.kind == "noarch":
        return (3, 0, 0)
    return (4, 0, 0)


def resolve(names: list[str], system: System) -> list[VariantAccepted | VariantRejected]:
    """Every parseable variant, accepted first in preference order, then rejected with reasons."""
    parsed = []
    for n in sorted(names):
        try:
            parsed.append(parse_variant(n))
        except VariantNameError:
            continue
    trace: list[VariantAccepted | VariantRejected] = []
    for v in parsed:
        reason = reject_reason(v, system)
        trace.append(VariantAccepted(v) if reason is None else VariantRejected(v, reason))
    trace.sort(key=lambda r: (isinstance(r, VariantRejected), _sort_key(r.variant)))
    return trace
