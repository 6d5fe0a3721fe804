"""Stalled (slowloris-style) connections are closed after `--idle-timeout-secs`, and the hub keeps serving
others meanwhile: a real `kforge hub serve` on 127.0.0.1, raw sockets as the stalling clients."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from support.kforge_hub import start_hub

STALLS = {
    "nothing sent": b"",
    "half a request line": b"GET /api/whoami-v2 HT",
    "headers never finished": b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\n",
    "body stops": b"POST /api/repos/create HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789",
}


def test_stalled_connections_are_closed_and_others_served(tmp_path):
    hub = start_hub(tmp_path, extra_args=("--idle-timeout-secs", "2"))
    try:
        host, port = urllib.parse.urlsplit(hub.url).netloc.split(":")
        socks = {}
        for name, data in STALLS.items():
            s = socket.create_connection((host, int(port)), timeout=15)
            s.sendall(data)
            socks[name] = s
        started = time.monotonic()
        # While they stall, a normal request is answered (the repo does not exist: 404 RepoNotFound).
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(f"{hub.url}/api/kernels/acme/none/revision/main", timeout=5)
        assert answered.value.code == 404
        for name, s in socks.items():
            # The hub may answer first (e.g. 400); what counts is that it closes the connection.
            while s.recv(4096):
                pass
            closed_after = time.monotonic() - started
            assert 1.5 < closed_after < 10, f"{name}: closed after {closed_after:.1f} s (idle timeout 2 s)"
            s.close()
    finally:
        hub.stop()
