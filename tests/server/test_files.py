"""The log and the recording: append-only, one write per event, 0600, readable after kill -9, bad paths fail at start-up."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess

import pytest

from tabd.daemon.runtime.events import EventLog, LogFile
from support.rawserver import RawServer, serve_command


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_log_file_is_private_append_only_and_one_write_per_event(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    path.write_text('{"earlier": true}\n')
    os.chmod(path, 0o600)
    log = LogFile(str(path))
    writes = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real_write(fd, data))
    events = EventLog()
    events.add_sink(log.write)
    events.emit("completion", chars=3, note="é😀" * 1000)
    events.emit("accept", id="1")
    monkeypatch.undo()
    assert len(writes) == 2 and all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes)
    log.close()
    log.write({"after": "close"})  # ignored, not an error
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"earlier": True} and [json.loads(x)["event"] for x in lines[1:]] == ["completion", "accept"]
    fresh = tmp_path / "fresh.jsonl"
    LogFile(str(fresh)).close()
    assert mode(fresh) == 0o600


def test_log_file_bad_paths_name_the_path(tmp_path):
    for bad in [tmp_path / "no" / "such" / "dir.jsonl", tmp_path]:
        with pytest.raises(OSError) as info:
            LogFile(str(bad))
        assert str(bad) in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--log", "--record"])
@pytest.mark.parametrize("where", ["missing-dir", "read-only-dir", "a-directory"])
def test_an_unwritable_path_fails_at_start_up_with_code_2(tmp_path, flag, where):
    if where == "missing-dir":
        path = tmp_path / "missing" / "f.jsonl"
    elif where == "read-only-dir":
        ro = tmp_path / "ro"
        ro.mkdir()
        os.chmod(ro, 0o500)
        path = ro / "f.jsonl"
        if os.access(ro, os.W_OK):  # running as root: permissions do not stop us
            pytest.skip("root can write anywhere")
    else:
        path = tmp_path
    r = subprocess.run(serve_command(flag, str(path)), capture_output=True, text=True, timeout=60, stdin=subprocess.PIPE)
    assert r.returncode == 2, r.stderr
    assert str(path) in r.stderr and "tabd serve:" in r.stderr
    assert r.stdout == ""  # nothing was served


@pytest.mark.slow
def test_kill_9_mid_session_leaves_both_files_readable(tmp_path):
    log, rec = tmp_path / "log.jsonl", tmp_path / "rec.jsonl"
    s = RawServer("--log", str(log), "--record", str(rec), "--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    uri = "file:///k.py"
    answered = 0
    try:
        s.initialize()
        s.open(uri, "def f(a, b):\n    ")
        version, col = 1, 4
        for round_ in range(6):
            for ch in "return a + b  # ok"[:6]:
                version += 1
                s.change(uri, version, [{"range": {"start": {"line": 1, "character": col}, "end": {"line": 1, "character": col}}, "text": ch}])
                col += 1
            reply = s.inline(uri, 1, col, timeout=120)
            assert "result" in reply
            answered += 1
        confirmed = s.document(uri)["version"]  # every change up to here has been recorded
        for _ in range(20):  # and more in flight when the kill lands
            version += 1
            s.change(uri, version, [{"range": {"start": {"line": 1, "character": col}, "end": {"line": 1, "character": col}}, "text": "x"}])
            col += 1
            s.request("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": col},
                                                        "context": {"triggerKind": 2}})
        s.proc.send_signal(signal.SIGKILL)
        assert s.wait(30) == -signal.SIGKILL
    finally:
        s.close()
    assert mode(log) == 0o600 and mode(rec) == 0o600

    def complete_lines(path):
        raw = path.read_bytes()
        lines = raw.split(b"\n")
        torn = lines.pop()  # after the last newline: empty, or a torn last event
        parsed = [json.loads(x) for x in lines if x]
        return parsed, torn

    events, torn = complete_lines(log)
    assert torn == b"", torn[:200]  # one write() per event: a kill lands between events, never inside one
    assert sum(e["event"] == "completion" for e in events) >= answered  # each answer was logged before it was sent
    recorded, torn = complete_lines(rec)
    assert torn == b"", torn[:200]
    ops = [r["op"] for r in recorded[1:]]
    assert ops[0] == "open" and ops.count("change") >= confirmed - 1
    texts = "".join(r["text"] for r in recorded[1:] if r["op"] == "change")
    assert texts.startswith(("return" * 6)[: confirmed - 1])


@pytest.mark.slow
def test_files_are_appended_across_runs(tmp_path):
    log, rec = tmp_path / "log.jsonl", tmp_path / "rec.jsonl"
    for run in range(2):
        s = RawServer("--log", str(log), "--record", str(rec), stderr=tmp_path / f"stderr{run}.txt")
        s.initialize()
        s.open(f"file:///run{run}.py", "pass\n")
        s.document(f"file:///run{run}.py")
        s.proc.send_signal(signal.SIGTERM)
        assert s.wait(30) == 0
    recorded = [json.loads(x) for x in rec.read_text().splitlines()]
    assert [r.get("uri") for r in recorded if r.get("op") == "open"] == ["file:///run0.py", "file:///run1.py"]
    assert mode(log) == 0o600
