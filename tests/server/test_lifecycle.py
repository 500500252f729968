"""How a real `tabd serve` ends: exit codes per LSP, the editor dying, stdin closing, SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tabd.daemon.runtime.lifecycle import process_alive
from support.rawserver import RawServer

pytestmark = pytest.mark.slow

EXIT_WITHIN_S = 30  # generous: the machine running the tests may be busy


def test_process_alive_sees_live_dead_and_zombie_processes():
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert process_alive(child.pid) and process_alive(os.getpid())
        child.kill()
        time.sleep(0.3)  # a zombie until reaped
        assert not process_alive(child.pid)
    finally:
        child.wait()
    assert not process_alive(child.pid)


def test_shutdown_then_exit_is_code_0(tmp_path):
    s = RawServer(stderr=tmp_path / "stderr.txt")
    s.initialize()
    assert s.shutdown_exit(EXIT_WITHIN_S) == 0


def test_exit_without_shutdown_is_code_1(tmp_path):
    s = RawServer(stderr=tmp_path / "stderr.txt")
    s.initialize()
    s.notify("exit")
    assert s.wait(EXIT_WITHIN_S) == 1


def test_exit_before_initialize_is_code_1(tmp_path):
    s = RawServer(stderr=tmp_path / "stderr.txt")
    s.notify("exit")
    assert s.wait(EXIT_WITHIN_S) == 1


@pytest.mark.parametrize("shutdown_first,code", [(False, 1), (True, 0)])
def test_stdin_closing_ends_the_server(tmp_path, shutdown_first, code):
    s = RawServer(stderr=tmp_path / "stderr.txt")
    s.initialize()
    if shutdown_first:
        s.result("shutdown")
    s.proc.stdin.close()
    assert s.wait(EXIT_WITHIN_S) == code


def test_the_server_exits_when_the_editor_dies(tmp_path):
    editor = subprocess.Popen(["sleep", "600"])  # stands in for the editor whose pid initialize names
    s = RawServer(stderr=tmp_path / "stderr.txt")
    try:
        s.initialize(process_id=editor.pid)
        s.alive()
        editor.kill()  # not reaped: a zombie still counts as dead
        t0 = time.monotonic()
        assert s.wait(EXIT_WITHIN_S) == 1  # stdin is still open: the pid poll ended it
        assert time.monotonic() - t0 < EXIT_WITHIN_S
    finally:
        editor.kill()
        editor.wait()
        s.close()
    assert "is gone" in (tmp_path / "stderr.txt").read_text()


def test_sigterm_flushes_the_log_and_the_recording_and_exits_0(tmp_path):
    log, rec = tmp_path / "log.jsonl", tmp_path / "rec.jsonl"
    s = RawServer("--log", str(log), "--record", str(rec), "--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    try:
        s.initialize()
        s.open("file:///t.py", "x = 1\n")
        for i in range(5):
            s.change("file:///t.py", 2 + i, [{"range": {"start": {"line": 1, "character": i}, "end": {"line": 1, "character": i}}, "text": "y"}])
        assert s.inline("file:///t.py", 1, 5, timeout=120)["result"] is not None
        s.inline("file:///t.py", 1, 5, timeout=120)
        s.proc.send_signal(signal.SIGTERM)
        assert s.wait(EXIT_WITHIN_S) == 0
    finally:
        s.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events].count("completion") == 2
    recorded = [json.loads(line) for line in rec.read_text().splitlines()]
    assert [r.get("op") for r in recorded[1:]] == ["open"] + ["change"] * 5
    assert "tabd_session" in recorded[0]
