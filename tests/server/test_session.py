"""Session files: reader, recorder and typed sessions (no server needed)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tabd.daemon.sessions.record import RecorderError, SessionRecorder
from tabd.daemon.sessions.format import (SessionError, apply_change, offset_at, parse_session, position_at, read_session,
                                 write_session)
from tabd.daemon.sessions.typist import candidate_spans, typed_session

SAMPLES = Path(__file__).resolve().parents[2] / "predictor" / "samples"
SAMPLE = SAMPLES / "inventory.py"
URI = "file:///w/a.py"


def _change(t, line, ch, text, end=None):
    end = end or (line, ch)
    return {"t": t, "op": "change", "uri": URI, "text": text,
            "range": {"start": {"line": line, "character": ch}, "end": {"line": end[0], "character": end[1]}}}


def _write_lines(path: Path, objs, tail: str = "") -> None:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs) + tail, encoding="utf-8")


def _final_text(session) -> str:
    docs = {}
    for e in session.events:
        if e["op"] == "open":
            docs[e["uri"]] = e["text"]
        elif e["op"] == "change":
            docs[e["uri"]] = apply_change(docs[e["uri"]], e["range"], e["text"])
    return docs


# ---------------------------------------------------------------- positions


def test_utf16_positions():
    text = "a😀b\nxy"
    assert offset_at(text, {"line": 0, "character": 3}) == 2  # the emoji is 2 UTF-16 units
    assert position_at(text, 3) == {"line": 0, "character": 4}
    assert position_at(text, 5) == {"line": 1, "character": 1}
    with pytest.raises(ValueError):
        offset_at(text, {"line": 0, "character": 2})  # inside the surrogate pair
    with pytest.raises(ValueError):
        offset_at(text, {"line": 3, "character": 0})


# ---------------------------------------------------------------- reader


def test_round_trip_write_read(tmp_path):
    events = [{"t": 0.0, "op": "open", "uri": URI, "language": "python", "text": "x = 1\n"},
              _change(0.1, 1, 0, "y"), {"t": 0.5, "op": "close", "uri": URI}]
    path = tmp_path / "s.jsonl"
    assert write_session(path, events) == 3
    s = read_session(path)
    assert s.language == "python" and s.events == events and not s.warnings


def test_torn_last_line_is_skipped_with_warning(tmp_path):
    path = tmp_path / "torn.jsonl"
    events = [{"tabd_session": 1, "language": "python"},
              {"t": 0.0, "op": "open", "uri": URI, "language": "python", "text": ""}, _change(0.1, 0, 0, "a")]
    _write_lines(path, events, tail='{"t": 0.2, "op": "change", "uri": "file:///w/a.py", "ran')
    s = read_session(path)
    assert len(s.events) == 2
    assert len(s.warnings) == 1 and "torn last line" in s.warnings[0] and ":4:" in s.warnings[0]


def test_bad_line_in_the_middle_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"tabd_session": 1}\n{"t": 0, "op": "open", "uri": "u", "text": ""}\nnot json\n'
                    '{"t": 1, "op": "close", "uri": "u"}\n')
    with pytest.raises(SessionError, match=r"bad.jsonl:3: not a JSON line"):
        read_session(path)


@pytest.mark.parametrize("content, message", [
    ("", "empty session file"),
    ("\n\n", "empty session file"),
    ('{"tabd_session": 2, "language": "python"}\n', "version 2 is newer"),
    ('{"t": 0, "op": "open", "uri": "u", "text": ""}\n', "missing header"),
    ("hello\n", "missing header"),
    ('{"tabd_session": "x"}\n', "bad session format version"),
])
def test_unusable_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "s.jsonl"
    path.write_text(content)
    with pytest.raises(SessionError, match=message):
        read_session(path)


def test_missing_file_is_a_session_error(tmp_path):
    with pytest.raises(SessionError, match="cannot read"):
        read_session(tmp_path / "nope.jsonl")


def test_events_outside_the_document_are_skipped_with_warning():
    lines = [json.dumps(o) + "\n" for o in [
        {"tabd_session": 1, "language": "python"},
        {"t": 0, "op": "open", "uri": URI, "text": "ab\n"},
        _change(0.1, 5, 0, "x"),            # line 5 does not exist
        _change(0.2, 0, 9, "x"),            # past the end of line 0
        _change(0.3, 0, 2, "c"),            # fine
        {"t": 0.4, "op": "frobnicate", "uri": URI},
        {"t": 0.5, "op": "change", "uri": "file:///other", "text": "x", "range": None},
    ]]
    s = parse_session(lines, "mem")
    assert [e["t"] for e in s.events] == [0, 0.3]
    assert len(s.warnings) == 4
    assert s.warnings[0].startswith("mem:3: change event skipped: range outside the document")
    assert _final_text(s)[URI] == "abc\n"


# ---------------------------------------------------------------- recorder


def test_recorder_creates_private_file_with_header(tmp_path):
    path = tmp_path / "rec.jsonl"
    rec = SessionRecorder(path)
    rec.record({"t": 0.0, "op": "open", "uri": URI, "language": "python", "text": "é\n"})
    rec.record({"op": "change", "uri": URI, "range": {"start": {"line": 1, "character": 0},
                                                       "end": {"line": 1, "character": 0}}, "text": "x"})
    rec.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"tabd_session": 1, "language": "python"}
    s = read_session(path)
    assert len(s.events) == 2 and "t" in s.events[1] and not s.warnings
    # a second recorder appends without a second header
    with SessionRecorder(path) as rec2:
        rec2.record({"t": 1.0, "op": "close", "uri": URI})
    assert [e["op"] for e in read_session(path).events] == ["open", "change", "close"]


def test_recorder_after_a_torn_line_keeps_the_file_readable(tmp_path):
    path = tmp_path / "rec.jsonl"
    with SessionRecorder(path) as rec:
        rec.record({"t": 0.0, "op": "open", "uri": URI, "text": ""})
    with open(path, "a") as fh:
        fh.write('{"t": 0.1, "op": "chan')  # the process died mid-write
    with SessionRecorder(path) as rec:
        rec.record({"t": 0.2, "op": "close", "uri": URI})
    with pytest.raises(SessionError, match=":3: not a JSON line"):
        read_session(path)  # the torn line is now in the middle: reported, with its line number
    with SessionRecorder(tmp_path / "ok.jsonl") as rec:
        rec.record({"t": 0.0, "op": "open", "uri": URI, "text": ""})
    assert len(read_session(tmp_path / "ok.jsonl").events) == 1


def test_recorder_unwritable_path_is_a_clear_oserror(tmp_path):
    with pytest.raises(OSError, match="cannot record session to") as info:
        SessionRecorder(tmp_path / "no" / "such" / "dir" / "s.jsonl")
    assert isinstance(info.value, RecorderError)


# ---------------------------------------------------------------- typed sessions


def test_from_file_is_deterministic_and_retypes_the_file(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    cmd = [sys.executable, "-m", "tabd.daemon", "session", "from-file", str(SAMPLE), "--spans", "3"]
    for out, seed in ((a, "7"), (b, "7"), (c, "8")):
        subprocess.run(cmd + ["-o", str(out), "--seed", seed], check=True, timeout=60, capture_output=True)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    s = read_session(a)
    assert not s.warnings
    assert s.events[0]["op"] == "open" and s.events[-1]["op"] == "close"
    assert _final_text(s)[SAMPLE.resolve().as_uri()] == SAMPLE.read_text()
    times = [e["t"] for e in s.events]
    assert times == sorted(times)
    changes = [e for e in s.events if e["op"] == "change"]
    assert len(changes) > 20
    # human rate: around 8 keystrokes a second, slower overall with pauses
    assert 2 < len(changes) / (times[-1] - times[0]) < 12


def test_typist_backspaces_typos_and_autoindents():
    _, events = typed_session([str(SAMPLE)], seed=1, spans=4, max_chars=1000)
    changes = [e for e in events if e["op"] == "change"]
    backspaces = [e for e in changes if e["text"] == ""]
    assert backspaces, "some typos are fixed with backspace"
    for e in backspaces:
        r = e["range"]
        assert r["start"]["line"] == r["end"]["line"] and r["end"]["character"] - r["start"]["character"] == 1
    assert any(e["text"].startswith("\n    ") for e in changes), "newline and indent arrive as one change"


def test_spans_without_ast_use_indentation(tmp_path):
    src = "function f(x) {\n  let y = x + 1;\n  return y;\n}\nconst z = f(2);\n"
    spans = candidate_spans(src, "a.js")
    assert any(s.kind == "block" and (s.start, s.end) == (1, 2) for s in spans)
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    return 1\nx = 2\n")
    _, events = typed_session([str(broken)], seed=0, spans=2)
    assert sum(e["op"] == "change" for e in events) > 0


def test_utf16_positions_in_typed_session(tmp_path):
    src = tmp_path / "u.py"
    src.write_text('def greet():\n    s = "héllo 😀 wörld"\n    return s\n\nx = 1\n', encoding="utf-8")
    _, events = typed_session([str(src)], seed=2, spans=3)
    path = tmp_path / "u.jsonl"
    write_session(path, events)
    s = read_session(path)
    assert not s.warnings
    assert _final_text(s)[src.resolve().as_uri()] == src.read_text(encoding="utf-8")


# ---------------------------------------------------------------- editors: cursor moves and auto-closed pairs


def test_move_events_and_change_cursors_round_trip_and_bad_ones_are_skipped(tmp_path):
    pair = dict(_change(0.1, 0, 4, "()"), cursor={"line": 0, "character": 5})
    events = [{"t": 0.0, "op": "open", "uri": URI, "language": "python", "text": "x = \n"}, pair,
              _change(0.2, 0, 5, "a"), {"t": 0.3, "op": "move", "uri": URI, "position": {"line": 0, "character": 7}},
              {"t": 0.4, "op": "close", "uri": URI}]
    path = tmp_path / "s.jsonl"
    write_session(path, events)
    s = read_session(path)
    assert s.events == events and not s.warnings
    assert s.keystrokes() == 3 and s.changes() == 2

    lines = [json.dumps(o) + "\n" for o in [
        {"tabd_session": 1, "language": "python"},
        {"t": 0, "op": "open", "uri": URI, "text": "s = 😀\n"},
        {"t": 0.1, "op": "move", "uri": URI, "position": {"line": 0, "character": 5}},   # inside the emoji
        {"t": 0.2, "op": "move", "uri": URI, "position": {"line": 4, "character": 0}},   # no such line
        {"t": 0.3, "op": "move", "uri": "file:///other", "position": {"line": 0, "character": 0}},
        {"t": 0.4, "op": "move", "uri": URI},
        dict(_change(0.5, 0, 6, "()"), cursor={"line": 0, "character": 9}),             # past the line's end
        {"t": 0.6, "op": "move", "uri": URI, "position": {"line": 0, "character": 6}},   # fine: after the emoji
    ]]
    s = parse_session(lines, "mem")
    assert [e["op"] for e in s.events] == ["open", "change", "move"]
    assert "cursor" not in s.events[1]  # the change stands without its cursor
    assert len(s.warnings) == 5 and all("skipped" in w or "ignored" in w for w in s.warnings)
    assert _final_text(s)[URI] == "s = 😀()\n"


def test_from_file_types_as_vscode_by_default_and_plain_on_request(tmp_path):
    src = tmp_path / "calls.py"
    src.write_text('def f(a):\n    return g(a, [1, 2], {"k": (a,)})\n\n\nx = f(1)\n', encoding="utf-8")
    out = {}
    for editor in (None, "plain"):
        path = tmp_path / f"{editor}.jsonl"
        cmd = [sys.executable, "-m", "tabd.daemon", "session", "from-file", str(src), "-o", str(path), "--spans", "2"]
        proc = subprocess.run(cmd + (["--editor", editor] if editor else []), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        out[editor] = read_session(path)
        assert not out[editor].warnings and _final_text(out[editor])[src.resolve().as_uri()] == src.read_text()
    assert any(e["op"] == "move" for e in out[None].events)
    assert any(e.get("text") == "()" and "cursor" in e for e in out[None].events)
    plain_ops = {e["op"] for e in out["plain"].events}
    assert "move" not in plain_ops and not any("cursor" in e for e in out["plain"].events)
    _, expected = typed_session([str(src)], seed=0, spans=2)  # plain is what the typist always wrote
    assert out["plain"].events == expected
