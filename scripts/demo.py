"""The main job on the embedded defaults, end to end.

Build the example kernels (kernels/relu, kernels/fp8-gemm) with `kforge build`, start a local hub on
127.0.0.1, `kforge push` them, load them with `kforge.get_kernel` and with HF's genuine `kernels.get_kernel`,
run the ops and compare with a torch reference. Exits non-zero on any mismatch. `scripts/demo.sh` installs
what it needs and runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.kforge_hub import kforge_bin, start_hub  # noqa: E402

ORG = "kforge-demo"
KERNELS = {"relu": "relu", "fp8-gemm": "fp8-gemm"}  # project dir under kernels/ → repo name


def step(message: str) -> float:
    print(f"\n==> {message}", flush=True)
    return time.monotonic()


def kforge(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [str(kforge_bin()), *args]
    print("$ kforge " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, **(env or {})})


# Runs in a fresh interpreter per loader so the two loaders never share imported modules or caches.
CHECK_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    loader, org = sys.argv[1], sys.argv[2]
    if loader == "kforge":
        from kforge import get_kernel
    else:
        from kernels import get_kernel
    # On a CUDA torch without a GPU, both loaders need backend="cpu" to accept the CPU variant.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    backend = None if device == "cuda" else "cpu"
    results = {"device": device}

    relu = get_kernel(f"{org}/relu", version=1, backend=backend)
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)).to(device)
    got = relu.relu(x)
    results["relu"] = bool(torch.equal(got, torch.relu(x)))

    gemm = get_kernel(f"{org}/fp8-gemm", version=1, backend=backend)
    g = torch.Generator().manual_seed(1)
    m, n, k = 96, 256, 512
    a = (torch.randn(m, k, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, generator=g) * 2).to(torch.float8_e4m3fn)
    a_scale = torch.rand(m, k // 128, generator=g) + 0.5
    b_scale = torch.rand((n + 127) // 128, k // 128, generator=g) + 0.5
    out = gemm.gemm(*(t.to(device) for t in (a, b, a_scale, b_scale))).cpu()
    # float64 reference of the block-scaled product, per reference/fp8-gemm.md
    sa = a_scale.double().repeat_interleave(128, dim=1)[:, :k]
    sb = b_scale.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    ref = (a.double() * sa) @ (b.double() * sb).T
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    results["fp8-gemm rel. error"] = rel
    results["fp8-gemm"] = out.dtype == torch.bfloat16 and rel < 2e-3
    print(json.dumps(results))
    """
)


def check_with(loader: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHECK_SCRIPT, loader, ORG],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{loader}.get_kernel failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend",
        action="append",
        help="build only these backends (repeatable; default: every backend with a toolchain here)",
    )
    parser.add_argument(
        "--skip-build",
        action="store_true",
        help="push the build/ directories already there (e.g. built on another machine) instead of building",
    )
    args = parser.parse_args()
    timings: dict[str, float] = {}
    backend_args = [a for b in args.backend or [] for a in ("--backend", b)]

    for project in [] if args.skip_build else KERNELS:
        started = step(f"kforge build kernels/{project}")
        kforge("build", str(REPO / "kernels" / project), *backend_args)
        timings[f"build {project}"] = time.monotonic() - started

    with tempfile.TemporaryDirectory(prefix="kforge-demo-") as scratch:
        scratch_path = Path(scratch)
        started = step("start a local hub on 127.0.0.1")
        hub = start_hub(scratch_path)
        try:
            print(f"hub at {hub.url}")
            token = hub.token("demo", orgs=[ORG])
            # As the hub's operator: mark the demo org a trusted kernel publisher, so both loaders load its
            # kernels without trust_remote_code (the gate HF's kernels 0.17 applies).
            kforge("hub", "org", "trust", ORG, "--data", str(hub.data_dir))
            timings["hub start"] = time.monotonic() - started

            started = step("kforge push")
            for project, repo in KERNELS.items():
                kforge(
                    "push",
                    str(REPO / "kernels" / project),
                    "--repo",
                    f"{ORG}/{repo}",
                    "--version",
                    "1",
                    env=hub.env(token),
                )
            timings["push"] = time.monotonic() - started

            failed = []
            for loader in ("kforge", "kernels"):
                started = step(f"{loader}.get_kernel from the hub, run, compare with torch")
                # A fresh cache per loader: everything comes from the hub.
                cache = scratch_path / f"cache-{loader}"
                env = {**hub.env(token), "HF_HOME": str(cache), "KERNELS_CACHE": str(cache / "kernels")}
                results = check_with(loader, env)
                timings[f"get_kernel ({loader})"] = time.monotonic() - started
                for name, value in results.items():
                    print(f"  {name}: {value}")
                failed += [f"{loader}: {k}" for k, v in results.items() if v is False]
        finally:
            hub.stop()

    print("\n==> timings")
    for name, seconds in timings.items():
        print(f"  {name:<28} {seconds:7.1f} s")
    if failed:
        print("\nFAILED: " + ", ".join(failed))
        return 1
    print("\nOK: built, pushed, loaded with kforge and kernels, ran, and matched torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
