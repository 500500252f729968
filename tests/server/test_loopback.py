"""Listeners on loopback only: `tabd serve --tcp/--metrics` refuse other addresses without --allow-remote, and TCP
listens on 127.0.0.1 and serves there.
"""
from __future__ import annotations

import subprocess
import time

import pytest

from tabd.lsp.framing import frame

from support.rawserver import serve_command


@pytest.mark.slow
@pytest.mark.parametrize("flag,value", [("--tcp", "0.0.0.0:2087"), ("--metrics", "192.168.1.1:9464"), ("--tcp", "[::]:2087"),
                                         ("--metrics", "example.com:9464")])
def test_listeners_refuse_non_loopback_addresses_without_allow_remote(flag, value):
    r = subprocess.run(serve_command(flag, value), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert "not a loopback address" in r.stderr and "--allow-remote" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("host,extra,bound", [(":", [], "127.0.0.1"), ("localhost:", [], "127.0.0.1"),
                                              ("0.0.0.0:", ["--allow-remote"], "0.0.0.0")])
def test_tcp_listens_on_loopback_and_serves(tmp_path, host, extra, bound):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(serve_command("--tcp", f"{host}{port}", *extra), stdin=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        with sock:
            sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": None, "capabilities": {}}}))
            sock.settimeout(30)
            data = b""
            while b"capabilities" not in data:
                chunk = sock.recv(65536)
                assert chunk
                data += chunk
            listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
            if listening.returncode == 0 and listening.stdout.strip():
                local = [line.split()[3] for line in listening.stdout.splitlines()]
                addresses = {a.rsplit(":", 1)[0] for a in local}
                if bound == "127.0.0.1":
                    assert addresses <= {"127.0.0.1", "[::1]"}, local
                else:
                    assert addresses & {"0.0.0.0", "*"}, local
    finally:
        proc.kill()
        proc.wait(10)
