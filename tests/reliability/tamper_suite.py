"""Loader tamper suite: random single-byte flips across the files of a built variant, each followed by a
kforge loader load in a worker process, counting refusals that happen before the variant's `.so` is mapped.

Used by tests/reliability/test_tamper.py (a few dozen flips, in CI) and bench/reliability.py (1000 flips).

A flip picks a file of the variant uniformly (so the small metadata.json and signature file are hit as
often as the large `.so`), then an offset uniformly, then XORs that byte with a random non-zero mask. Each
flip gets a fresh copy of the pristine variant at a new path, so no in-process memo (verified digests,
loaded modules) can hide it. Two loader modes:

- `digest`: `kforge.get_local_kernel(variant_dir)` as the loader ships (digest of all but metadata.json).
- `signed`: `kforge.signing.verify_variant_signature(variant_dir, trusted_keys)` then `get_local_kernel`, the
  order the loader is to apply for publishers that require signatures.

A worker that loads a tampered variant has that module in `sys.modules`, which would turn later loads into
"already loaded" errors; so it reports and exits, and the parent starts a fresh worker for the rest.

Run as a worker: `python tamper_suite.py` reading one JSON job list on stdin, writing one JSON line per flip.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CPU_VARIANT = "torch211-cxx11-cpu-x86_64-linux"


def kforge_bin() -> Path:
    path = Path(os.environ.get("KFORGE_BIN", REPO / "target" / "debug" / "kforge"))
    if not path.is_file():
        raise FileNotFoundError(f"kforge binary not found at {path}; run `cargo build -p kforge-cli`")
    return path


def _kforge(*args: str) -> None:
    cmd = [str(kforge_bin()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kforge {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")


def build_variant(work: Path, *, sign: bool) -> tuple[Path, bytes | None]:
    """Build kernels/relu's CPU variant into WORK/build, signed with a fresh key if `sign`.

    Returns (variant_dir, public key bytes or None)."""
    from kforge.signing import parse_public_key

    out = work / "build"
    _kforge("build", str(REPO / "kernels" / "relu"), "--variant", CPU_VARIANT, "--out", str(out))
    variant = out / CPU_VARIANT
    if not sign:
        return variant, None
    key = work / "signing-key"
    _kforge("key", "generate", "--out", str(key))
    _kforge("key", "sign", str(variant), "--key", str(key))
    return variant, parse_public_key((work / "signing-key.pub").read_text())


def plan_flips(variant: Path, count: int, seed: int) -> list[dict]:
    """`count` flips (file, offset, mask) over the variant's files, reproducible from `seed`."""
    rng = random.Random(seed)
    files = sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file())
    sizes = {f: (variant / f).stat().st_size for f in files}
    flips = []
    for _ in range(count):
        f = rng.choice(files)
        flips.append({"file": f, "offset": rng.randrange(sizes[f]), "mask": rng.randrange(1, 256)})
    return flips


@dataclass
class TamperResult:
    flips: int = 0
    refused: int = 0
    refused_clear: int = 0
    loaded: list[dict] = field(default_factory=list)
    mapped_before_refusal: list[dict] = field(default_factory=list)
    unclear: list[dict] = field(default_factory=list)
    by_file: dict[str, list[int]] = field(default_factory=dict)  # file -> [flips, refused]
    errors: dict[str, int] = field(default_factory=dict)  # exception type -> count


def run_flips(
    variant: Path, flips: list[dict], scratch: Path, *, trusted_key: bytes | None, timeout: float = 900
) -> TamperResult:
    """Apply each flip to a fresh copy and load it in worker processes; aggregate the outcomes."""
    result = TamperResult()
    pending = [dict(f, index=i) for i, f in enumerate(flips)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    while pending:
        job = {
            "variant": str(variant),
            "scratch": str(scratch),
            "trusted_key": trusted_key.hex() if trusted_key else None,
            "flips": pending,
        }
        done = subprocess.run(
            [sys.executable, __file__],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"tamper worker produced no result (exit {done.returncode}):\n{done.stderr}")
        for r in lines:
            result.flips += 1
            stats = result.by_file.setdefault(r["file"], [0, 0])
            stats[0] += 1
            if r["outcome"] == "loaded":
                result.loaded.append(r)
                continue
            result.refused += 1
            stats[1] += 1
            result.errors[r["error"]] = result.errors.get(r["error"], 0) + 1
            if r["mapped"]:
                result.mapped_before_refusal.append(r)
            if r["clear"]:
                result.refused_clear += 1
            else:
                result.unclear.append(r)
        seen = {r["index"] for r in lines}
        pending = [f for f in pending if f["index"] not in seen]
    return result


def pyc_injection_runs(variant: Path, scratch: Path, *, trusted_key: bytes | None) -> bool:
    """Add `__pycache__/__init__.<tag>.pyc`, compiled from other code as an unchecked hash-based pyc
    (PEP 552), to a copy of `variant` and load it as the worker does. The digest leaves out `__pycache__`
    and `*.pyc` (HF's rule, since Python writes them beside imported sources), and Python runs an unchecked
    pyc without reading the source. Returns True when the injected code ran."""
    import py_compile

    work = scratch / "pyc-injection"
    target = work / variant.name
    shutil.copytree(variant, target)
    marker = work / "injected-code-ran"
    evil = work / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n")
    cache = target / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    cache.parent.mkdir()
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(evil), cfile=str(cache), invalidation_mode=mode)
    job = {"target": str(target), "trusted_key": trusted_key.hex() if trusted_key else None}
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    cmd = [sys.executable, __file__, "--load-one"]
    subprocess.run(
        cmd, input=json.dumps(job), text=True, capture_output=True, timeout=300, check=False, env=env
    )
    return marker.exists()


def _load_one() -> None:
    """Load one variant dir as the worker does (signature first when a key is given); errors are ignored."""
    import kforge
    from kforge import signing
    from kforge.metadata import _EXCLUDED_TOP

    job = json.load(sys.stdin)
    target = Path(job["target"])
    if job["trusted_key"]:
        _EXCLUDED_TOP.add(signing.SIG_FILE)
        signing.verify_variant_signature(target, [bytes.fromhex(job["trusted_key"])])
    kforge.get_local_kernel(target, backend="cpu")


# ---------------------------------------------------------------------------------------------------------
# Worker


def _mapped(path: Path) -> bool:
    """Whether any file under `path` is mapped into this process (i.e. was dlopen'ed)."""
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/maps") as maps:
        return any(prefix in line for line in maps)


def _worker() -> None:
    import kforge
    import torch  # noqa: F401  (imported once, before any flip, so its own mappings are not attributed)
    from kforge import signing
    from kforge.errors import KernelError
    from kforge.metadata import _EXCLUDED_TOP

    job = json.load(sys.stdin)
    pristine = Path(job["variant"])
    scratch = Path(job["scratch"])
    keys = [bytes.fromhex(job["trusted_key"])] if job["trusted_key"] else None
    if keys is not None:
        # The signature file sits beside metadata.json and, like metadata.json.sigstore, is not part of the
        # digest. Until the loader's exclusion list names it, add it here (only in this worker process).
        _EXCLUDED_TOP.add(signing.SIG_FILE)
    for flip in job["flips"]:
        target = scratch / f"flip-{flip['index']:05d}" / pristine.name
        shutil.copytree(pristine, target)
        path = target / flip["file"]
        data = bytearray(path.read_bytes())
        data[flip["offset"]] ^= flip["mask"]
        path.write_bytes(bytes(data))
        out = dict(flip)
        try:
            if keys is not None:
                signing.verify_variant_signature(target, keys)
            kforge.get_local_kernel(target, backend="cpu")
        except Exception as e:  # every refusal is recorded, whatever its type
            message = str(e)
            out.update(
                outcome="refused",
                error=type(e).__name__,
                message=message.splitlines()[0][:300] if message else "",
                # Clear: one of the loader's own errors, naming the variant directory or the flipped file.
                clear=isinstance(e, KernelError) and (str(target) in message or flip["file"] in message),
                mapped=_mapped(target),
            )
            print(json.dumps(out), flush=True)
            shutil.rmtree(target.parent, ignore_errors=True)
            continue
        out.update(outcome="loaded", mapped=True)
        print(json.dumps(out), flush=True)
        return  # the tampered module is now in sys.modules: let the parent start a fresh worker


if __name__ == "__main__":
    _load_one() if sys.argv[1:] == ["--load-one"] else _worker()
