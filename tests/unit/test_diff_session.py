"""Sessions typed from a diff (`tabd session from-diff`): hunks as a person makes them, the events that make them,
files and directories paired, bad files skipped with a note."""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tabd.daemon.sessions.diff_typist import diff_session, final_text, hunk_events, pair_files
from tabd.daemon.sessions.format import read_session
from tabd.daemon.sessions.hunks import apply_hunks, hunks, is_rename
from tabd.daemon.sessions.typist import TypingStyle

OLD = '''def f(count):
    count = count + 1
    return count


def g(x):
    return (x, "a")
'''
NEW = '''def f(total):
    total = total + 1
    y = 2
    return total


def g(x, y=None):
    return (x, "b")
'''
URI = "file:///w/a.py"


def test_a_rename_inside_lines_is_the_token_not_the_line():
    hs = hunks(OLD, NEW)
    assert apply_hunks(OLD, hs) == NEW
    renames = [h for h in hs if h.key == ("count", "total")]
    assert len(renames) == 4 and all(h.old(OLD) == "count" and h.text == "total" for h in renames)
    assert all(is_rename(h.key) for h in renames)
    inserted = [h for h in hs if h.start == h.end and "y = 2" in h.text]
    assert len(inserted) == 1 and inserted[0].text == "\n    y = 2"  # Enter at the end of the line above, then typed
    assert OLD[inserted[0].start - 1:inserted[0].start + 1] == "1\n"
    assert [h.key for h in hs if is_rename(h.key) and h.key[0] != "count"] == [("a", "b")]  # inside its quotes
    assert ("", ", y=None") in [h.key for h in hs]  # an argument added: a substitution too (old "")
    assert any(h.text == ", y=None" and not h.old(OLD) for h in hs)
    for a, b in zip(hs, hs[1:]):
        assert a.end < b.start  # in order, none touching


@pytest.mark.parametrize("old,new", [("", "x\ny\n"), ("a\nb\nc\n", "a\nc\n"), ("a", "a\n"), ("a\n", ""),
                                     ("x = 1\n", "x = 1\n\n\ndef h():\n    pass\n"), ("é😀\n", "é😀x\n")])
def test_any_diff_applies(old, new):
    assert apply_hunks(old, hunks(old, new)) == new


def _keys(events):
    return [e for e in events if e["op"] in ("change", "move")]


@pytest.mark.parametrize("editor", ["plain", "vscode"])
def test_events_move_select_delete_and_type_each_hunk_in_order(editor):
    hs = hunks(OLD, NEW)
    style = TypingStyle(typo_rate=0.0, think_rate=0.0)
    events, end = hunk_events(OLD, hs, URI, "python", random.Random(1), style, 0.0, editor)
    assert events[0] == {"t": 0.0, "op": "open", "uri": URI, "language": "python", "text": OLD}
    assert events[-1]["op"] == "close" and events[-1]["t"] == round(end, 3)
    assert final_text(events, URI) == NEW
    starts = [i for i, e in enumerate(events) if e["op"] == "move" and "hunk" in e]
    assert [events[i]["hunk"] for i in starts] == list(range(1, len(hs) + 1))
    first = starts[0]  # count -> total on line 0: move there, delete `count` in one change, type t-o-t-a-l
    assert events[first]["position"] == {"line": 0, "character": 6}
    delete = events[first + 1]
    assert delete["text"] == "" and delete["range"] == {"start": {"line": 0, "character": 6},
                                                        "end": {"line": 0, "character": 11}}
    assert "".join(e["text"] for e in events[first + 2:starts[1]]) == "total"
    assert all(len(e["text"]) == 1 for e in events[first + 2:starts[1]])
    gaps = [events[i]["t"] - events[i - 1]["t"] for i in starts[1:]]
    assert min(gaps) >= style.span_pause[0]  # a pause before each hunk
    times = [e["t"] for e in events]
    assert times == sorted(times)
    enter = [e for e in events if e["op"] == "change" and e["text"].startswith("\n")]
    assert enter and enter[0]["text"] == "\n    "  # Enter with the auto-indent, one change


def test_same_seed_same_session_and_typos_still_end_in_the_new_file():
    style = TypingStyle(typo_rate=0.3)
    a = hunk_events(OLD, hunks(OLD, NEW), URI, "python", random.Random(5), style)[0]
    b = hunk_events(OLD, hunks(OLD, NEW), URI, "python", random.Random(5), style)[0]
    assert a == b
    assert any(e["op"] == "change" and e["text"] == "" and e["range"]["end"]["character"]
               - e["range"]["start"]["character"] == 1 for e in a)  # a typo backspaced
    assert final_text(a, URI) == NEW


def test_directories_pair_by_relative_path_and_skip_what_cannot_be_typed(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "pkg").mkdir(parents=True)
    (new / "pkg").mkdir(parents=True)
    (old / "pkg" / "a.py").write_text(OLD)
    (new / "pkg" / "a.py").write_text(NEW.replace("\n", "\r\n"))  # line breaks are read as \n
    (new / "pkg" / "fresh.py").write_text("x = 1\n")
    (old / "gone.py").write_text("y = 2\n")
    (old / "same.py").write_text("z = 3\n")
    (new / "same.py").write_text("z = 3\n")
    (old / "img.png").write_bytes(b"\x89PNG\0\0")
    (new / "img.png").write_bytes(b"\x89PNG\0\1")
    (old / "latin.txt").write_bytes(b"caf\xe9")
    (new / "latin.txt").write_bytes(b"caf\xe9s")
    pairs, notes = pair_files(old, new)
    assert [p.path.relative_to(new).as_posix() for p in pairs] == ["pkg/a.py", "pkg/fresh.py"]
    assert pairs[1].old == ""
    assert any("gone.py" in n and "only in" in n for n in notes)
    assert any("img.png" in n and "binary" in n for n in notes)
    assert any("latin.txt" in n and "UTF-8" in n for n in notes)
    language, events = diff_session(pairs, seed=2)
    assert language == "python"
    for p in pairs:
        assert final_text(events, p.path.resolve().as_uri()) == p.new


def test_cli_writes_a_readable_session_and_explains_skips(tmp_path):
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(OLD)
    new.write_text(NEW)
    out = tmp_path / "s.jsonl"
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-diff", str(old), str(new), "-o", str(out),
                           "--seed", "3", "--editor", "plain"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "edits" in proc.stderr
    session = read_session(out)
    assert not session.warnings
    assert final_text(session.events, new.resolve().as_uri()) == NEW
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\0\1")
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-diff", str(binary), str(binary), "-o",
                           str(tmp_path / "b.jsonl")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "binary or not UTF-8, skipped" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-diff", str(old), str(tmp_path), "-o",
                           str(tmp_path / "c.jsonl")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "two files or two directories" in proc.stderr and "Traceback" not in proc.stderr


def test_a_name_that_grows_or_shrinks_at_one_end_types_or_deletes_only_that_end():
    old = "a = iteritems(x)\nb = count\nc = _t\nd = kw\n"
    new = "a = items(x)\nb = counter\nc = t\nd = varkw\n"
    hs = hunks(old, new)
    assert apply_hunks(old, hs) == new
    assert [(h.old(old), h.text) for h in hs] == [("iter", ""), ("", "er"), ("_", ""), ("", "var")]
    assert [h.key for h in hs] == [("iteritems", "items"), ("count", "counter"), ("_t", "t"), ("kw", "varkw")]
