"""Replay's edit user (`tabd replay`, edit_user.py) and `tabd session from-diff` sessions through LSP servers: an
oracle server that proposes the diff's next hunk, one that proposes wrong edits, one that offers none, and the real
`tabd serve`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tabd.daemon.sessions.diff_typist import FilePair, diff_session, final_text
from tabd.daemon.sessions.edit_user import next_edit
from tabd.daemon.sessions.format import write_session

OLD = '''def report(count, items):
    """Print the count."""
    if count > 10:
        print("many", count)
    for item in items:
        print(item, count)
    return count


def other(x):
    return x + 1
'''
NEW = OLD.replace("count", "total").replace("return x + 1", "return x + 2")

# A stdio LSP server that knows the new file: every copilotInlineEdit is the first hunk from the cursor on (the rest
# of the edit under way, else the next one), or with FAKE_WRONG that edit with an extra "x" (never the next edit).
# It offers the capability unless FAKE_NO_EDITS; an edit asked right after an accept is "from memory".
FAKE = r'''
import os, sys
from tabd.daemon.sessions.format import apply_change, offset_at, position_at
from tabd.daemon.sessions.hunks import hunks
from tabd.lsp.framing import frame, read_message

TARGET = open(os.environ["FAKE_TARGET"], encoding="utf-8").read()
WRONG, NO_EDITS = bool(os.environ.get("FAKE_WRONG")), bool(os.environ.get("FAKE_NO_EDITS"))
docs, state = {}, {"last": None, "accepted": [], "shows": 0, "just_accepted": False, "n": 0}
out, inp = sys.stdout.buffer, sys.stdin.buffer

def send(msg):
    out.write(frame(msg))
    out.flush()

def edit_at(uri, pos):
    text = docs[uri]
    at = offset_at(text, pos)
    found = [h for h in hunks(text, TARGET) if h.end >= at] or hunks(text, TARGET)
    if not found:
        return None
    h = found[0]
    state["n"] += 1
    return {"text": h.text + ("x" if WRONG else ""), "range": {"start": position_at(text, h.start), "end": position_at(text, h.end)},
            "textDocument": {"uri": uri, "version": 0},
            "command": {"title": "Accept next edit", "command": "tabd.acceptInlineEdit", "arguments": [f"e{state['n']}"]}}

while True:
    msg = read_message(inp)
    if msg is None:
        sys.exit(0)
    method, params, mid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    result = None
    if method == "initialize":
        caps = {"textDocumentSync": {"openClose": True, "change": 2}, "inlineCompletionProvider": {},
                "executeCommandProvider": {"commands": ["tabd.acceptInlineEdit"]}}
        if not NO_EDITS:
            caps["experimental"] = {"copilotInlineEdit": True, "tabd": {"inlineEdit": True}}
        result = {"capabilities": caps}
    elif method == "textDocument/didOpen":
        docs[params["textDocument"]["uri"]] = params["textDocument"]["text"]
    elif method == "textDocument/didChange":
        uri = params["textDocument"]["uri"]
        for c in params["contentChanges"]:
            docs[uri] = apply_change(docs[uri], c["range"], c["text"]) if "range" in c else c["text"]
    elif method == "textDocument/inlineCompletion":
        state["last"] = {"source": "none"}
        result = {"items": []}
    elif method == "textDocument/copilotInlineEdit":
        if NO_EDITS:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
            continue
        edit = edit_at(params["textDocument"]["uri"], params["position"])
        state["last"] = {"source": "cache" if state["just_accepted"] else ("model" if edit else "none")}
        state["just_accepted"] = False
        result = {"edits": [edit] if edit else []}
    elif method == "textDocument/didShowInlineEdit":
        state["shows"] += 1
    elif method == "workspace/executeCommand":
        state["accepted"] += params.get("arguments", [])
        state["just_accepted"] = True
        result = {"accepted": True}
    elif method == "tabd/stats":
        result = {"last": state["last"], "model": "fake", "accepted": state["accepted"], "shows": state["shows"]}
    elif method == "tabd/document":
        result = {"text": docs.get(params["uri"])}
    elif method == "exit":
        sys.exit(0)
    if mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": result})
'''


@pytest.fixture()
def diff_files(tmp_path):
    old, new = tmp_path / "old" / "report.py", tmp_path / "new" / "report.py"
    old.parent.mkdir()
    new.parent.mkdir()
    old.write_text(OLD)
    new.write_text(NEW)
    return old, new


def _session(tmp_path: Path, new: Path, editor: str = "plain") -> Path:
    language, events = diff_session([FilePair(new, OLD, NEW)], seed=4, editor=editor)
    path = tmp_path / f"diff-{editor}.jsonl"
    write_session(path, events, language)
    return path


def _replay(tmp_path: Path, session: Path, target: Path, *flags: str, env: dict | None = None) -> dict:
    server = tmp_path / "fake_nes.py"
    server.write_text(FAKE)
    import os

    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--json", "--speed", "0",
                           "--no-progress", "--check-sync", "--think-ms", "0", "--accept", "tab", "--server-cmd",
                           f"{sys.executable} {server}", *flags], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FAKE_TARGET": str(target), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("editor", ["plain", "vscode"])
def test_the_edit_user_takes_each_next_edit_and_the_document_stays_in_sync(tmp_path, diff_files, editor):
    old, new = diff_files
    summary = _replay(tmp_path, _session(tmp_path, new, editor), new)
    edits = summary["edits"]
    assert summary["sync"] == {"checked": 1, "mismatches": 0}  # the server's document is the new file at the end
    assert edits["offered"] is True and edits["requests"] > 0
    assert edits["accepted"] >= 5  # count -> total four times, and x + 2 (each proposed as the person reaches it)
    assert 0 < edits["accepted"] <= edits["shown"] and edits["shown_not_next"] == edits["shown"] - edits["accepted"]
    assert edits["jumps"] >= 1  # the edit in other() is lines below the last rename
    assert edits["keys_spent"] == edits["accepted"] + edits["jumps"]
    assert edits["keys_saved"] == edits["keys_needed"] - edits["keys_spent"] > 0
    assert 0 < edits["edit_keystrokes_saved_share"] <= edits["keystrokes_saved_share"] < 1
    assert summary["keystrokes"] + edits["keys_needed"] == edits["keystrokes_recorded"]
    after = edits["after_accept"]  # the fake answers the edit asked right after an accept "from memory"
    assert after["requests"] == edits["accepted"] and after["hit_rate"] == 1.0
    lat = edits["latency_ms"]["after_accept"]
    assert 0 < lat["p50"] <= lat["p99"]
    assert summary["server"]["shows"] == edits["shown"]  # didShowInlineEdit for each edit shown
    assert len(summary["server"]["accepted"]) == edits["accepted"]  # each accept ran the edit's command


def test_edits_that_are_not_the_next_edit_are_shown_and_not_taken(tmp_path, diff_files):
    old, new = diff_files
    summary = _replay(tmp_path, _session(tmp_path, new), new, env={"FAKE_WRONG": "1"})
    edits = summary["edits"]
    assert summary["sync"] == {"checked": 1, "mismatches": 0}
    assert edits["shown"] > 0 and edits["accepted"] == 0 and edits["shown_not_next"] == edits["shown"]
    assert edits["keys_saved"] == 0 and edits["after_accept"]["requests"] == 0


def test_no_edit_requests_without_the_capability_or_with_no_edits(tmp_path, diff_files):
    old, new = diff_files
    session = _session(tmp_path, new)
    for flags, env in (((), {"FAKE_NO_EDITS": "1"}), (("--no-edits",), {})):
        summary = _replay(tmp_path, session, new, *flags, env=env)
        assert summary["edits"]["offered"] is False and summary["edits"]["requests"] == 0
        assert summary["sync"] == {"checked": 1, "mismatches": 0}
        assert summary["edits"]["keystrokes_saved_share"] == summary["keystrokes_saved_share"]


def test_the_next_edit_is_the_edit_under_way_or_the_one_after():
    uri = "file:///w/a.py"
    language, events = diff_session([FilePair(Path("/w/a.py"), OLD, NEW)], seed=1, editor="plain")
    starts = [i for i, e in enumerate(events) if e.get("hunk")]
    doc = OLD
    # at the first edit's start: that edit (count -> total in the signature)
    nxt = next_edit(events, starts[0], uri, doc, True)
    assert nxt.end == starts[1] and nxt.text == OLD.replace("count", "total", 1)
    assert nxt.keys == sum(1 for e in events[starts[0]:starts[1]] if e["op"] in ("change", "move"))
    # mid-edit (after the move and the deletion): still that edit
    mid = starts[0] + 2
    for e in events[starts[0]:mid]:
        if e["op"] == "change":
            from tabd.daemon.sessions.format import apply_change
            doc = apply_change(doc, e["range"], e["text"])
    assert next_edit(events, mid, uri, doc, True).end == starts[1]
    # unmarked (a recorded session): the typing up to the close is one edit
    plain = [{k: v for k, v in e.items() if k != "hunk"} for e in events]
    whole = next_edit(plain, starts[0], uri, OLD, False)
    assert whole.text == NEW and plain[whole.end]["op"] == "close"
    assert final_text(events, uri) == NEW


SERVE_FLAGS = ["--max-new-tokens", "8"]  # short answers keep the model's share of these tests small


@pytest.mark.slow
def test_a_from_diff_session_through_tabd_serve_stays_in_sync(tmp_path, diff_files):
    # `tabd session from-diff` on two directories (a file changed, a file added, a binary skipped), replayed through
    # a real `tabd serve` by the Tab user: every document the server holds is the new file when it is closed.
    old, new = diff_files
    (new.parent / "added.py").write_text("def added(a, b):\n    return (a, b)\n")
    (old.parent / "blob.bin").write_bytes(b"\0\1\2")
    (new.parent / "blob.bin").write_bytes(b"\0\1\3")
    session = tmp_path / "dirs.jsonl"
    made = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-diff", str(old.parent), str(new.parent),
                           "-o", str(session), "--seed", "2"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0 and "blob.bin: binary or not UTF-8, skipped" in made.stderr, made.stderr
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--json", "--speed", "0",
                           "--check-sync", "--no-progress", "--accept", "tab", *SERVE_FLAGS],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    assert s["sync"] == {"checked": 2, "mismatches": 0}, s.get("sync")
    assert s["requests"] > 0 and s["answered"] == s["requests"] - s["cancelled"]
    assert s["edits"]["accepted"] <= s["edits"]["shown"]


@pytest.mark.slow
@pytest.mark.parametrize("editor", ["plain", "vscode"])
def test_a_rename_in_a_real_diff_is_taken_with_tab_from_tabd_serve(tmp_path, diff_files, editor):
    # The person renames `count` to `total` at six places (and changes `x + 1`). Through a real `tabd serve` (the copy
    # backend: no model; propagation needs none), the edit user types the first rename and the docstring's by hand
    # and takes the other four as edits the server proposes, each after the first answered from memory; the document
    # stays in sync.
    old, new = diff_files
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(_session(tmp_path, new, editor)), "--json",
                           "--speed", "0", "--check-sync", "--no-progress", "--accept", "tab", "--backend", "copy",
                           "--edit-min-confidence", "0"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    edits = s["edits"]
    assert s["sync"] == {"checked": 1, "mismatches": 0}
    assert edits["offered"] is True
    # every rename after the first in code: the docstring's `count` is the person's own (a rename in code is never
    # proposed inside a string), and the walk goes on after it
    assert edits["accepted"] == 4, edits
    assert edits["shown_not_next"] == edits["shown"] - 4
    assert edits["after_accept"]["requests"] == 4 and edits["after_accept"]["hit_rate"] >= 0.75, edits["after_accept"]
    assert edits["keys_saved"] > 0 and edits["keystrokes_saved_share"] > s["keystrokes_saved_share"]
    assert s["server"]["edits"]["accepted"] == 4  # each accept ran tabd.acceptInlineEdit with a known id
