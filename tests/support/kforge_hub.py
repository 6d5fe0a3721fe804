"""Start a real `kforge hub serve` on 127.0.0.1 for tests.

API (other suites import this; keep it stable):

    from support.kforge_hub import start_hub, Hub

    hub = start_hub(tmp_path)          # launches the binary on port 0, waits for its listening line
    hub.url                            # "http://127.0.0.1:PORT" (use as HF_ENDPOINT)
    hub.data_dir                       # the hub's --data directory (under tmp_path)
    token = hub.token("alice", orgs=["kernels-community"])  # write token by default; write=False for read
    hub.env(token)                     # {"HF_ENDPOINT": url, "HF_TOKEN": token, ...} to pass to clients
    hub.trust("kernels-community")     # mark an org as trusted kernel publisher (what get_kernel checks)
    hub.stop()                         # SIGTERM, then kill after a timeout

The pytest fixture `kforge_hub` (exported from tests/conftest.py) yields a started Hub and stops it after.
The binary is $KFORGE_BIN, or target/debug/kforge at the repository root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING_PREFIX = "kforge hub listening on "


def kforge_bin() -> Path:
    """Path of the kforge binary: $KFORGE_BIN or target/debug/kforge under the repository root."""
    path = Path(os.environ.get("KFORGE_BIN", REPO_ROOT / "target" / "debug" / "kforge"))
    if not path.is_file():
        raise FileNotFoundError(
            f"kforge binary not found at {path}; build it with `cargo build -p kforge-cli` or set KFORGE_BIN"
        )
    return path


@dataclass
class Hub:
    """A running hub process. Create it with `start_hub`."""

    url: str
    data_dir: Path
    process: subprocess.Popen
    _stderr_lines: list[str] = field(default_factory=list)

    def token(self, user: str, *, write: bool = True, orgs: list[str] | None = None) -> str:
        """Create a token for `user` (write scope by default, plus membership in `orgs`)."""
        cmd = [str(kforge_bin()), "hub", "token", "create", "--data", str(self.data_dir), "--user", user]
        if write:
            cmd.append("--write")
        for org in orgs or []:
            cmd += ["--org", org]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout.strip()

    def trust(self, org: str, *, trusted: bool = True) -> None:
        """Set `org`'s `trustedKernelPublisher` flag (what `kernels.get_kernel` checks by default)."""
        action = "trust" if trusted else "untrust"
        cmd = [str(kforge_bin()), "hub", "org", action, org, "--data", str(self.data_dir)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr.strip()}")

    def env(self, token: str | None = None) -> dict[str, str]:
        """Environment variables pointing huggingface_hub/kernels at this hub (merge into os.environ)."""
        # No HF_HUB_DISABLE_TELEMETRY: with it, kernels 0.17.2 builds a user-agent ending in "; ", which
        # huggingface_hub 2.4's HTTP stack refuses as an illegal header value before any request is sent.
        env = {"HF_ENDPOINT": self.url, "HF_HUB_OFFLINE": "0"}
        if token is not None:
            env["HF_TOKEN"] = token
        return env

    def stderr(self) -> str:
        """What the server has written to stderr so far (for failure messages)."""
        return "".join(self._stderr_lines)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server gracefully (SIGTERM), killing it if it does not exit within `timeout`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)


def start_hub(tmp_path: Path, *, timeout: float = 30.0, extra_args: tuple[str, ...] = ()) -> Hub:
    """Launch `kforge hub serve --data tmp_path/hub-data --addr 127.0.0.1:0` and wait until it listens."""
    data_dir = Path(tmp_path) / "hub-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(kforge_bin()), "hub", "serve", "--data", str(data_dir), "--addr", "127.0.0.1:0", *extra_args]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    stderr_lines: list[str] = []
    # Drain stderr continuously so a chatty server never blocks on a full pipe.
    threading.Thread(
        target=lambda: stderr_lines.extend(iter(process.stderr.readline, "")), daemon=True
    ).start()

    url_box: list[str] = []

    def read_listening_line() -> None:
        for line in iter(process.stdout.readline, ""):
            if line.startswith(LISTENING_PREFIX):
                url_box.append(line[len(LISTENING_PREFIX) :].strip())
                return

    reader = threading.Thread(target=read_listening_line, daemon=True)
    reader.start()
    reader.join(timeout)
    if not url_box:
        process.kill()
        process.wait(timeout=10)
        raise RuntimeError(
            f"`{' '.join(cmd)}` did not print `{LISTENING_PREFIX}URL` within {timeout}s "
            f"(exit code {process.returncode}); stderr:\n{''.join(stderr_lines)}"
        )
    return Hub(url=url_box[0], data_dir=data_dir, process=process, _stderr_lines=stderr_lines)
