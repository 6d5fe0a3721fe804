"""Reliability suite: fuzzing, loader tamper, hub concurrency and kill -9, signatures. Prints the figures and
writes bench/results/reliability.md (with commit, machine and versions).

    .venv/bin/python bench/reliability.py                 # full: 10000 execs/target, 1000 flips, 100 kills
    .venv/bin/python bench/reliability.py --quick         # smaller counts, for a smoke run
    .venv/bin/python bench/reliability.py --skip fuzz     # any of the parts: fuzz tamper injection hub
                                                          # hostile kill diskfull signatures

Every part runs on this machine only (the hub listens on 127.0.0.1) and is bounded in count and time.
Exit status 1 if any figure misses its goal (a crash, a lost commit, an inconsistent store, an accepted
tampered variant, a failed signature test).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "reliability"))
sys.path.insert(0, str(REPO / "python"))

import tamper_suite  # noqa: E402
from support.kforge_hub import Hub, start_hub  # noqa: E402

PARTS = ("fuzz", "tamper", "injection", "hub", "hostile", "kill", "diskfull", "signatures")


def sh(cmd: list[str], *, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


# ---------------------------------------------------------------------------------------------------------
# Parts: each returns (ok, figures dict, lines for the report)


def part_fuzz(execs: int, work: Path) -> tuple[bool, dict, list[str]]:
    summary = work / "fuzz-summary.jsonl"
    env = dict(os.environ, FUZZ_SUMMARY=str(summary))
    done = sh(["bash", "scripts/fuzz.sh", str(execs)], timeout=3600, env=env)
    rows = [json.loads(x) for x in summary.read_text().splitlines()] if summary.exists() else []
    if not rows:
        return (
            False,
            {"error": tail(done.stderr)},
            [f"fuzz run failed before any target ran:\n{tail(done.stderr)}"],
        )
    crashes = sum(r["crashes"] for r in rows)
    lines = ["| target | execs | seconds | crashes |", "|---|---:|---:|---:|"]
    lines += [f"| {r['target']} | {r['execs']} | {r['seconds']} | {r['crashes']} |" for r in rows]
    ok = done.returncode == 0 and crashes == 0 and all(r["execs"] >= execs for r in rows)
    return ok, {"targets": rows, "crashes": crashes}, lines


def part_tamper(flips: int, work: Path) -> tuple[bool, dict, list[str]]:
    figures, lines, ok = {}, [], True
    for mode, sign in (("signed", True), ("digest", False)):
        variant, key = tamper_suite.build_variant(work / f"tamper-{mode}", sign=sign)
        plan = tamper_suite.plan_flips(variant, flips, seed=20261203)
        t0 = time.monotonic()
        r = tamper_suite.run_flips(
            variant, plan, work / f"tamper-{mode}-flips", trusted_key=key, timeout=3600
        )
        secs = time.monotonic() - t0
        figures[mode] = {
            "flips": r.flips,
            "refused": r.refused,
            "refused_clear": r.refused_clear,
            "loaded": len(r.loaded),
            "mapped_before_refusal": len(r.mapped_before_refusal),
            "by_file": r.by_file,
            "errors": r.errors,
            "seconds": round(secs, 1),
        }
        label = (
            "loader + signature check (publisher requires signatures)"
            if sign
            else "loader digest check alone (unsigned variant)"
        )
        lines.append(
            f"- {label}: **{r.refused}/{r.flips} flips refused** ({r.refused_clear} with a kforge "
            f"error naming the file or variant), {len(r.mapped_before_refusal)} refused only after the "
            f"`.so` was mapped, {len(r.loaded)} loaded; {secs:.0f} s"
        )
        per_file = ", ".join(f"{f}: {v[1]}/{v[0]}" for f, v in sorted(r.by_file.items()))
        lines.append(f"  - per file (refused/flips): {per_file}")
        lines.append(f"  - errors: {', '.join(f'{k} {v}' for k, v in sorted(r.errors.items()))}")
        for x in r.loaded[:5]:
            lines.append(f"  - loaded despite flip: `{x['file']}` byte {x['offset']} ^ 0x{x['mask']:02x}")
        if sign:
            ok &= r.refused == r.flips and not r.mapped_before_refusal and r.refused_clear == r.flips
        else:
            # Without a signature, metadata.json itself is unprotected; every other file must be refused.
            ok &= not r.mapped_before_refusal and all(x["file"] == "metadata.json" for x in r.loaded)
    return ok, figures, lines


def part_injection(work: Path) -> tuple[bool, dict, list[str]]:
    """Files the digest leaves out must not be able to run code either."""
    variant, key = tamper_suite.build_variant(work / "injection", sign=True)
    ran = tamper_suite.pyc_injection_runs(variant, work / "injection-run", trusted_key=key)
    verdict = "**ran**: the loader executes bytecode the digest does not cover" if ran else "did not run"
    lines = [
        f"- unchecked hash-based `__pycache__/__init__.*.pyc` added to a signed, digest-clean variant: "
        f"injected code {verdict}"
    ]
    return not ran, {"pyc_injection_ran": ran}, lines


def part_hub() -> tuple[bool, dict, list[str]]:
    """The hub's own fault tests (crates/kforge-hub/tests/server.rs, crates/kforge-cli/tests/hub_cli.rs)."""
    tests = [
        ("kforge-hub", "server", "concurrent_writers_lose_nothing_and_conflicts_are_412"),
        ("kforge-hub", "server", "client_disconnect_mid_commit_changes_nothing"),
        ("kforge-hub", "server", "bad_input_is_refused_with_clear_4xx_and_writes_nothing"),
        ("kforge-cli", "hub_cli", "kill_dash_nine_mid_commit_leaves_a_consistent_repo"),
    ]
    figures, lines, ok = {}, [], True
    for crate, test_file, name in tests:
        t0 = time.monotonic()
        done = sh(
            ["cargo", "test", "-q", "-p", crate, "--test", test_file, name, "--", "--exact", "--nocapture"],
            timeout=1800,
        )
        secs = time.monotonic() - t0
        passed = done.returncode == 0 and re.search(r"test result: ok\. 1 passed", done.stdout) is not None
        ok &= passed
        entry = {"passed": passed, "seconds": round(secs, 1)}
        m = re.search(r"412 conflicts answered: (\d+)", done.stderr + done.stdout)
        if m:
            # The test's constants: 16 writers x 16 commits, every commit must land.
            entry.update(
                writers=16, attempted=256, landed=256 if passed else None, conflicts_412=int(m.group(1))
            )
        figures[name] = entry
        extra = ""
        if "conflicts_412" in entry:
            n412 = entry["conflicts_412"]
            extra = f" (16 writers x 16 commits: 256 attempted, 256 landed, 0 lost; {n412} answered 412)"
        lines.append(f"- `{name}`: {'passed' if passed else 'FAILED'}{extra}, {secs:.0f} s")
        if not passed:
            lines.append(f"```\n{tail(done.stdout + done.stderr, 25)}\n```")
    return ok, figures, lines


def part_hostile(work: Path, wait: float = 40.0, idle_conns: int = 200) -> tuple[bool, dict, list[str]]:
    """Slowloris-style connections against a real hub: does it close connections that stall, and does it
    keep serving others meanwhile?"""
    import socket
    import threading

    hub = start_hub(work / "hostile-hub")
    token = hub.token("alice", orgs=["acme"])
    create = urllib.request.Request(
        f"{hub.url}/api/repos/create",
        data=json.dumps({"name": "x", "organization": "acme", "type": "kernel"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(create, timeout=30).read()
    host, port = urllib.parse.urlsplit(hub.url).netloc.split(":")
    stalls = {
        "connect, send nothing": b"",
        "half a request line": b"GET /api/whoami-v2 HT",
        "headers never finished": b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\n",
        "commit body stalls after 10 of 1000 bytes": (
            b"POST /api/kernels/acme/x/commit/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + token.encode()
            + b"\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1000\r\n\r\n0123456789"
        ),
    }
    closed_after: dict[str, float | None] = {}

    def stall(name: str, data: bytes) -> None:
        with socket.create_connection((host, int(port)), timeout=wait) as c:
            c.sendall(data)
            t0 = time.monotonic()
            try:
                while c.recv(4096):  # an error answer may come first; what counts is the close
                    pass
                closed_after[name] = round(time.monotonic() - t0, 1)
            except (TimeoutError, OSError):
                closed_after[name] = None

    threads = [threading.Thread(target=stall, args=kv) for kv in stalls.items()]
    idle = []
    try:
        for t in threads:
            t.start()
        for _ in range(idle_conns):
            idle.append(socket.create_connection((host, int(port)), timeout=10))
        t0 = time.monotonic()
        served = get(f"{hub.url}/api/kernels/acme/none/refs", timeout=10) is not None
    except urllib.error.HTTPError as e:
        served = e.code == 404  # answered (the repo does not exist): the hub is still serving
    except Exception:
        served = False
    latency = time.monotonic() - t0
    for t in threads:
        t.join(wait + 5)
    for c in idle:
        c.close()
    hub.stop()
    lines = [
        f"- with {idle_conns} idle connections open, a normal request was "
        f"{'answered' if served else 'NOT answered'} in {latency * 1000:.0f} ms"
    ]
    for name in stalls:
        after = closed_after.get(name)
        lines.append(
            f"- {name}: "
            + (
                f"closed by the hub after {after} s"
                if after is not None
                else f"still open after {wait:.0f} s"
            )
        )
    ok = served and all(closed_after.get(n) is not None for n in stalls)
    return (
        ok,
        {"served_with_idle": served, "latency_ms": round(latency * 1000), "closed_after_s": closed_after},
        lines,
    )


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def get(url: str, timeout: float = 60) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def consistency_problems(hub: Hub, repo: str) -> list[str]:
    """Every ref points to a commit whose tree lists; every listed file downloads and matches its size and
    git blob id; no partial upload is left in the data directory."""
    problems = []
    refs = json.loads(get(f"{hub.url}/api/kernels/{repo}/refs"))
    for ref in refs["branches"] + refs["tags"]:
        commit = ref["targetCommit"]
        try:
            tree = json.loads(get(f"{hub.url}/api/kernels/{repo}/tree/{commit}?recursive=true"))
        except Exception as e:
            problems.append(f"{ref['ref']} -> {commit}: tree does not list ({e})")
            continue
        for entry in tree:
            if entry["type"] != "file":
                continue
            path = urllib.parse.quote(entry["path"])
            try:
                data = get(f"{hub.url}/kernels/{repo}/resolve/{commit}/{path}")
            except Exception as e:
                problems.append(f"{ref['ref']}: {entry['path']} does not download ({e})")
                continue
            if len(data) != entry["size"]:
                problems.append(
                    f"{ref['ref']}: {entry['path']} is {len(data)} bytes, listed as {entry['size']}"
                )
            lfs = entry.get("lfs")
            if lfs and hashlib.sha256(data).hexdigest() != lfs["oid"]:
                problems.append(f"{ref['ref']}: {entry['path']} does not match its sha256 {lfs['oid']}")
            if not lfs and git_blob_sha1(data) != entry["oid"]:
                problems.append(f"{ref['ref']}: {entry['path']} does not match its blob id {entry['oid']}")
    tmp = hub.data_dir / "tmp"
    if tmp.is_dir() and any(tmp.iterdir()):
        problems.append(f"partial uploads left in {tmp}: {sorted(p.name for p in tmp.iterdir())[:5]}")
    return problems


def head(hub: Hub, repo: str, branch: str) -> str | None:
    refs = json.loads(get(f"{hub.url}/api/kernels/{repo}/refs"))
    return next((b["targetCommit"] for b in refs["branches"] if b["name"] == branch), None)


def part_kill(kills: int, payload: int, work: Path, seed: int) -> tuple[bool, dict, list[str]]:
    """kill -9 the hub at a random moment of a push, restart it on the same data, check consistency."""
    from kforge.metadata import compute_digest

    rng = random.Random(seed)
    variant, _ = tamper_suite.build_variant(work / "kill-src", sign=False)
    project = work / "kill-project"
    dest = project / "build" / variant.name
    shutil.copytree(variant, dest)
    repo = "acme/relu"

    def new_payload() -> str:
        data = rng.randbytes(payload)
        (dest / "payload.bin").write_bytes(data)
        meta = json.loads((dest / "metadata.json").read_text())
        meta["digest"] = {"algorithm": "sha256", "files": compute_digest(dest)}
        (dest / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        return git_blob_sha1(data)

    def push(hub: Hub, token: str) -> subprocess.Popen:
        cmd = [str(tamper_suite.kforge_bin()), "push", str(project), "--repo", repo]
        env = dict(os.environ, **hub.env(token))
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    hub = start_hub(work / "kill-hub")
    token = hub.token("alice", orgs=["acme"])
    new_payload()
    t0 = time.monotonic()
    p = push(hub, token)
    _, err = p.communicate(timeout=600)
    window = time.monotonic() - t0
    if p.returncode != 0:
        hub.stop()
        return False, {"error": err}, [f"baseline push failed: {tail(err)}"]
    survived, landed, not_landed, bad = 0, 0, 0, []
    t_start = time.monotonic()
    try:
        for i in range(kills):
            want = new_payload()
            before = head(hub, repo, "v1")
            p = push(hub, token)
            time.sleep(rng.uniform(0, window * 1.2))
            hub.process.kill()  # SIGKILL
            hub.process.wait(timeout=30)
            p.communicate(timeout=120)
            hub = start_hub(work / "kill-hub")
            problems = consistency_problems(hub, repo)
            after = head(hub, repo, "v1")
            if after != before:
                landed += 1
                tree = json.loads(get(f"{hub.url}/api/kernels/{repo}/tree/{after}?recursive=true"))
                got = next((e["oid"] for e in tree if e["path"].endswith("/payload.bin")), None)
                if got != want:
                    problems.append(f"v1 moved to {after} but its payload.bin is {got}, pushed {want}")
            else:
                not_landed += 1
            if problems:
                bad.append({"kill": i, "problems": problems[:5]})
            else:
                survived += 1
        # The hub still takes a clean push after all the kills.
        want = new_payload()
        p = push(hub, token)
        _, err = p.communicate(timeout=600)
        final_ok = p.returncode == 0 and not consistency_problems(hub, repo)
    finally:
        hub.stop()
    secs = time.monotonic() - t_start
    figures = {
        "kills": kills,
        "survived": survived,
        "push_landed": landed,
        "push_not_landed": not_landed,
        "payload_bytes": payload,
        "kill_window_s": round(window * 1.2, 2),
        "final_push_ok": final_ok,
        "failures": bad,
        "seconds": round(secs, 1),
    }
    lines = [
        f"- **{survived}/{kills} kill points survived**: hub SIGKILLed at a uniform random time in the first "
        f"{window * 1.2:.2f} s of a push ({payload // 1024} KiB payload + the relu CPU variant), restarted "
        f"on the same data, then every ref's tree listed and every file downloaded and matched its size and "
        f"blob id; no partial upload left in tmp/",
        f"  - the interrupted push landed whole {landed} times and not at all {not_landed} times; a clean "
        f"push afterwards {'succeeded' if final_ok else 'FAILED'}; {secs:.0f} s",
    ]
    for b in bad[:5]:
        lines.append(f"  - kill {b['kill']}: {'; '.join(b['problems'])}")
    return survived == kills and final_ok, figures, lines


def part_diskfull(work: Path, size_mib: int = 24, payload_mib: int = 4) -> tuple[bool, dict, list[str]]:
    """The hub's data directory on a small tmpfs: pushes until the disk is full, then the store must be
    consistent, the failed push must get an error, and the hub must still answer and restart."""
    from kforge.metadata import compute_digest

    mnt = work / "diskfull"
    mnt.mkdir()
    mount = sh(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mnt)], timeout=60)
    if mount.returncode != 0:
        return (
            True,
            {"skipped": mount.stderr.strip()},
            [f"- skipped: cannot mount a tmpfs ({mount.stderr.strip()})"],
        )
    hub = None
    try:
        variant, _ = tamper_suite.build_variant(work / "diskfull-src", sign=False)
        project = work / "diskfull-project"
        dest = project / "build" / variant.name
        shutil.copytree(variant, dest)
        hub = start_hub(mnt)
        token = hub.token("alice", orgs=["acme"])
        pushes, landed, error = 0, 0, ""
        while pushes < 4 * size_mib // payload_mib and not error:
            (dest / "payload.bin").write_bytes(os.urandom(payload_mib << 20))
            meta = json.loads((dest / "metadata.json").read_text())
            meta["digest"] = {"algorithm": "sha256", "files": compute_digest(dest)}
            (dest / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
            cmd = [str(tamper_suite.kforge_bin()), "push", str(project), "--repo", "acme/relu"]
            done = subprocess.run(
                cmd, env=dict(os.environ, **hub.env(token)), capture_output=True, text=True, timeout=600
            )
            pushes += 1
            if done.returncode == 0:
                landed += 1
            else:
                error = tail(done.stderr, 3)
        alive = hub.process.poll() is None
        problems = consistency_problems(hub, "acme/relu") if alive else ["the hub died"]
        hub.stop()
        hub = start_hub(mnt)
        problems += [f"after restart: {p}" for p in consistency_problems(hub, "acme/relu")]
    finally:
        if hub is not None:
            hub.stop()
        sh(["umount", str(mnt)], timeout=60)
    full = bool(error)
    lines = [
        f"- data dir on a {size_mib} MiB tmpfs, {payload_mib} MiB pushes: {landed} landed, then push "
        f"{pushes} "
        + (f"failed with: `{error.splitlines()[-1] if error else ''}`" if full else "never filled the disk"),
        f"- hub {'kept serving' if alive else 'DIED'}; store "
        + ("consistent before and after a restart" if not problems else f"INCONSISTENT: {problems[:3]}"),
    ]
    ok = full and alive and not problems
    return (
        ok,
        {"pushes": pushes, "landed": landed, "error": error, "alive": alive, "problems": problems},
        lines,
    )


def part_signatures() -> tuple[bool, dict, list[str]]:
    figures, lines, ok = {}, [], True
    runs = [
        ("kforge-sign (Rust)", ["cargo", "test", "-q", "-p", "kforge-sign"]),
        ("kforge key/verify CLI", ["cargo", "test", "-q", "-p", "kforge-cli", "--test", "sign_cli"]),
        (
            "Python kforge.signing + tamper",
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/reliability"],
        ),
    ]
    for label, cmd in runs:
        done = sh(cmd, timeout=1800)
        out = done.stdout + done.stderr
        passed = sum(int(n) for n in re.findall(r"(\d+) passed", out))
        failed = sum(int(n) for n in re.findall(r"(\d+) failed", out))
        good = done.returncode == 0 and failed == 0 and passed > 0
        ok &= good
        figures[label] = {"passed": passed, "failed": failed}
        lines.append(f"- {label}: {passed} passed, {failed} failed")
        if not good:
            lines.append(f"```\n{tail(out, 25)}\n```")
    return ok, figures, lines


# ---------------------------------------------------------------------------------------------------------


def versions() -> dict:
    def first_line(cmd):
        try:
            return sh(cmd, timeout=60).stdout.strip().splitlines()[0]
        except Exception:
            return "unavailable"

    import torch

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "commit": first_line(["git", "rev-parse", "HEAD"]),
        "dirty": bool(sh(["git", "status", "--porcelain"], timeout=60).stdout.strip()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "rustc": first_line(["rustc", "--version"]),
        "cargo-fuzz": first_line(["cargo", "fuzz", "--version"]),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--execs", type=int, default=10000, help="fuzz executions per target")
    ap.add_argument("--flips", type=int, default=1000, help="single-byte flips per tamper mode")
    ap.add_argument("--kills", type=int, default=100, help="hub kill -9 points")
    ap.add_argument("--payload-kib", type=int, default=1024, help="payload pushed during each kill point")
    ap.add_argument("--quick", action="store_true", help="500 execs, 100 flips, 10 kills")
    ap.add_argument("--skip", action="append", default=[], choices=PARTS, help="leave a part out")
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--no-build", action="store_true", help="use the kforge binary as built ($KFORGE_BIN)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "reliability.md")
    args = ap.parse_args()
    if args.quick:
        args.execs, args.flips, args.kills = 500, 100, 10
    build = None if args.no_build else sh(["cargo", "build", "-q", "-p", "kforge-cli"], timeout=1800)
    if build is not None and build.returncode != 0:
        print(f"cargo build -p kforge-cli failed:\n{tail(build.stderr)}", file=sys.stderr)
        return 1

    v = versions()  # before the run: the commit and tree state that was measured
    results = {}
    with tempfile.TemporaryDirectory(prefix="kforge-reliability-") as tmp:
        work = Path(tmp)
        steps = {
            "fuzz": ("Fuzzing (cargo-fuzz, fixed executions)", lambda: part_fuzz(args.execs, work)),
            "tamper": ("Loader tamper suite", lambda: part_tamper(args.flips, work)),
            "injection": ("Bytecode injection beside a verified variant", lambda: part_injection(work)),
            "hub": ("Hub concurrency and crash tests", part_hub),
            "hostile": ("Hub against stalled (slowloris-style) connections", lambda: part_hostile(work)),
            "kill": (
                "Hub kill -9 during pushes",
                lambda: part_kill(args.kills, args.payload_kib * 1024, work, args.seed),
            ),
            "diskfull": ("Hub with a full disk", lambda: part_diskfull(work)),
            "signatures": ("Signature tests", part_signatures),
        }
        for part, (title, fn) in steps.items():
            if part in args.skip:
                continue
            print(f"==> {title}", flush=True)
            t0 = time.monotonic()
            try:
                ok, figures, lines = fn()
            except Exception as e:  # a part that breaks is reported as failed, the others still run
                ok, figures, lines = False, {"error": repr(e)}, [f"part failed: {e!r}"]
            results[part] = {"title": title, "ok": ok, "figures": figures, "lines": lines}
            print("\n".join(lines))
            print(f"    {'PASS' if ok else 'FAIL'} ({time.monotonic() - t0:.0f} s)\n", flush=True)

    if v["cargo-fuzz"] == "unavailable":  # scripts/fuzz.sh installs it on a machine's first run
        v["cargo-fuzz"] = versions()["cargo-fuzz"]
    failed = [p for p, r in results.items() if not r["ok"]]
    summary = ", ".join(f"{p} {'PASS' if r['ok'] else 'FAIL'}" for p, r in results.items())
    md = [
        "# Reliability figures",
        "",
        "Produced by `" + " ".join([".venv/bin/python bench/reliability.py", *sys.argv[1:]]) + "`.",
        "",
        f"Overall: **{'PASS' if not failed else 'FAIL'}** ({summary}).",
        "",
        f"- commit `{v['commit']}`{' (with uncommitted changes)' if v['dirty'] else ''}, {v['date']}",
        f"- machine: {v['machine']}",
        f"- {v['rustc']}; {v['cargo-fuzz']}; Python {v['python']}; torch {v['torch']}",
        "",
    ]
    for r in results.values():
        md += [f"## {r['title']}: {'PASS' if r['ok'] else 'FAIL'}", "", *r["lines"], ""]
    md += ["## Raw figures", "", "```json", json.dumps(results_figures(results), indent=2), "```", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(md))
    print(f"wrote {args.out}")
    print("all parts passed" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


def results_figures(results: dict) -> dict:
    return {part: r["figures"] for part, r in results.items()}


if __name__ == "__main__":
    sys.exit(main())
