"""Cold and warm `get_kernel` latency, kforge vs HF kernels 0.17.2, against one local `kforge hub serve`.

Each load runs in a fresh Python process (torch and the loader imported before the clock starts), so the time
is get_kernel alone: resolve, download when cold, verify, import. Requests are counted by a proxy in front of
the hub. Usage: python bench/loader_latency.py [--runs N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "python"), str(REPO / "python" / "tests"), str(REPO / "tests")]

from counting_proxy import CountingProxy  # noqa: E402
from kernel_trees import make_tree  # noqa: E402
from support.kforge_hub import kforge_bin, start_hub  # noqa: E402

ORG = "bench"
PROBE = """
import json, sys, time, torch
t0 = time.perf_counter()
import {lib}
t1 = time.perf_counter()
m = {lib}.get_kernel("{repo}", {pin}, backend="cpu", trust_remote_code=True)
t2 = time.perf_counter()
again = {lib}.get_kernel("{repo}", {pin}, backend="cpu", trust_remote_code=True)
t3 = time.perf_counter()
assert again is m and torch.equal(m.relu(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))
print(json.dumps({{"import": t1 - t0, "first": t2 - t1, "repeat": t3 - t2}}))
"""


def probe(lib: str, repo: str, pin: str, env: dict, proxy: CountingProxy) -> dict:
    proxy.reset()
    code = PROBE.format(lib=lib, repo=repo, pin=pin)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{lib} {pin} failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["requests"] = len(proxy.requests)
    return out


def summarize(runs: list[dict]) -> dict:
    def ms(values) -> float:
        return round(statistics.median(values) * 1e3, 2)

    return {
        "get_kernel_median_ms": ms(r["first"] for r in runs),
        "get_kernel_min_ms": round(min(r["first"] for r in runs) * 1e3, 2),
        "import_plus_get_kernel_median_ms": ms(r["import"] + r["first"] for r in runs),
        "repeat_in_process_median_ms": ms(r["repeat"] for r in runs),
        "requests": sorted({r["requests"] for r in runs}),
    }


def ratio(results: dict, case: str) -> float:
    key = "import_plus_get_kernel_median_ms"
    return results["kforge"][case][key] / results["kernels"][case][key]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from huggingface_hub import HfApi

    with tempfile.TemporaryDirectory(prefix="kforge-loader-bench-") as tmp:
        tmp = Path(tmp)
        hub = start_hub(tmp)
        try:
            token = hub.token("bench", orgs=[ORG])
            api = HfApi(endpoint=hub.url, token=token)
            repo = f"{ORG}/relu"
            tree = make_tree(tmp / "relu", ns=f"_relu_cpu_{uuid.uuid4().hex[:7]}")
            api.create_repo(repo, repo_type="kernel")
            api.create_branch(repo, repo_type="kernel", branch="v1")
            api.upload_folder(
                repo_id=repo,
                repo_type="kernel",
                folder_path=tree / "build",
                path_in_repo="build",
                revision="v1",
            )
            commit = next(
                b.target_commit
                for b in api.list_repo_refs(repo, repo_type="kernel").branches
                if b.name == "v1"
            )
            proxy = CountingProxy(hub.url)
            base = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
            base.update(HF_ENDPOINT=proxy.url, HF_TOKEN=token, PYTHONPATH=str(REPO / "python"))
            results = {}
            for lib in ("kforge", "kernels"):
                cold, warm_v, warm_pin = [], [], []
                for i in range(args.runs):
                    env = {**base, "KERNELS_CACHE": str(tmp / f"cache-{lib}-{i}")}
                    cold.append(probe(lib, repo, "version=1", env, proxy))
                    warm_v.append(probe(lib, repo, "version=1", env, proxy))
                    warm_pin.append(probe(lib, repo, f"revision={commit!r}", env, proxy))
                results[lib] = {
                    name: summarize(runs)
                    for name, runs in (("cold", cold), ("warm_version", warm_v), ("warm_pinned", warm_pin))
                }
            proxy.close()
        finally:
            hub.stop()
    import huggingface_hub
    import torch

    import kernels

    report = {
        "what": "get_kernel latency, fresh process per load (torch imported before the clock), relu CPU "
        "variant, local kforge hub; requests = both calls of the process",
        "runs": args.runs,
        "commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "host": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
        "versions": {
            "torch": torch.__version__,
            "kernels": kernels.__version__,
            "huggingface_hub": huggingface_hub.__version__,
            "python": platform.python_version(),
        },
        "kforge_bin": str(kforge_bin()),
        "results": results,
        "ratio_warm_pinned_kforge_over_kernels": round(ratio(results, "warm_pinned"), 3),
        "ratio_warm_version_kforge_over_kernels": round(
            ratio(results, "warm_version"),
            3,
        ),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
