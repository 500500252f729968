"""Hostile input against a real `tabd serve` (#41): every request answered, no setting disables a session, no glob
freezes the server, and nothing but frames on the LSP stream. One test per case the hostile client found; each
failed on the code before (a timeout, a -32603 with a traceback, a session left uninitialized, a document out of
sync, or bytes outside any frame)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.rawserver import frame
from support.strict import StrictServer

URI = "file:///w/a.py"
ARGS = ("--backend", "copy", "--no-warmup", "--debounce-ms", "0")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def raw_request(msg_id: int, method: str, params_json: str) -> bytes:
    return frame(('{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}' % (msg_id, method, params_json)).encode())


def shown(s: StrictServer) -> list[dict]:
    return [m["params"] for m in s.notifications("window/showMessage")]


@pytest.fixture
def server(tmp_path):
    s = StrictServer(*ARGS, stderr=tmp_path / "stderr.txt")
    yield s
    s.close()


def finish(s: StrictServer) -> None:
    """The session ends normally, and the stream held nothing but frames."""
    assert s.shutdown_exit() == 0
    assert s.stray == b"", s.stray[:300]


def test_deep_json_is_refused_for_that_message_only(server):
    s = server
    s.send_bytes(raw_request(1, "initialize", '{"capabilities":{},"x":%s}' % nested(5000)))
    assert s.response(1)["error"]["code"] == -32600  # never answered before: the session could not even start
    s.initialize()
    s.open(URI, "x = 1\n")
    change = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 5}},
                            "text": "2"}]}}
    # one read: an edit, a request nested 1,000 deep, a plain request; the deep one took the other two with it
    s.send_bytes(frame(change) + raw_request(77, "tabd/stats", nested(1000)) + raw_request(78, "tabd/stats", "{}"))
    assert s.response(77)["error"]["code"] == -32600
    assert "result" in s.response(78)
    assert s.document(URI)["text"] == "x = 2\n"
    s.send_bytes(raw_request(79, "tabd/stats", nested(70)))  # deeper than any LSP message, shallow for the decoder
    assert s.response(79)["error"]["code"] == -32600
    finish(s)


@pytest.mark.parametrize("options,word", [
    ({"exclude": ["[z-a]", "*.ok"]}, "[z-a]"),
    ({"exclude": ["{" * 900 + "a" + "}" * 900]}, "exclude glob ignored"),
    ({"log": "a\u0000b"}, "option 'log'"),
    ({"log": "\ud800"}, "option 'log'"),
])
def test_a_bad_option_is_reported_and_the_session_starts(server, options, word):
    s = server
    result = s.initialize(options)
    assert "inlineCompletionProvider" in result["capabilities"]
    s.open(URI, "x = 1\n")
    assert s.document(URI)["text"] == "x = 1\n"  # "the server is not initialized" before
    s.alive()
    messages = [m for m in shown(s) if word in m["message"]]
    assert len(messages) == 1 and messages[0]["type"] == 2 and len(messages[0]["message"]) < 600, shown(s)
    finish(s)


def test_pathological_globs_do_not_freeze_the_server(server):
    globs = ["**/" * 20 + "*a", "*a" * 7 + "b", "**/" * 6 + "*a"]
    s = server
    s.initialize({"exclude": globs})
    s.open("file:///w/" + "d/" * 10 + "b", "x\n")  # each open ran a backtracking match for over 10 s
    s.open("file:///w/" + "a" * 100, "x\n")
    s.open("file:///w/" + "d/" * 40 + "b", "x\n")
    s.open("file:///w/" + "d/" * 10 + "xa", "x\n")  # this one matches: excluded
    s.alive(timeout=5)
    reply = s.inline("file:///w/" + "d/" * 10 + "xa", 0, 1)
    assert reply["result"]["tabd"]["reason"] == "excluded"
    assert s.inline("file:///w/" + "d/" * 40 + "b", 0, 1)["result"].get("tabd", {}).get("reason") != "excluded"
    finish(s)


def test_set_enabled_with_a_huge_number_is_a_warning(server):
    s = server
    s.initialize()
    s.notify("tabd/setEnabled", {"enabled": False, "minutes": 10 ** 400})
    reply = s.call("tabd/setEnabled", {"enabled": False, "minutes": 10 ** 400})
    assert "error" not in reply  # -32603 with an OverflowError's traceback before
    s.alive()
    messages = shown(s)
    assert messages and all(m["type"] == 2 and "minutes must be" in m["message"] for m in messages), messages
    assert s.inline(URI, 0, 0)["error"]["code"] == -32602  # not open; suggestions were not switched off by it
    s.open(URI, "x = 1\n")
    assert s.inline(URI, 0, 5)["result"].get("tabd", {}).get("reason") != "disabled"
    finish(s)


@pytest.mark.parametrize("text", [None, 5, {"a": 1}, ["x"]])
def test_document_text_must_be_a_string(server, text):
    s = server
    s.initialize()
    s.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": text}})
    assert s.call("tabd/document", {"uri": URI})["error"]["code"] == -32602  # stored as "None", "5" before
    s.open(URI, "x = 1\n")
    s.change(URI, 2, [{"text": text}])
    s.change(URI, 3, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                       "text": text}])
    assert s.document(URI) == {"uri": URI, "version": 1, "text": "x = 1\n", "lines": 2}
    finish(s)


def test_cancel_request_sent_as_a_request_is_answered(server):
    s = server
    s.initialize()
    reply = s.call("$/cancelRequest", {"id": 12345}, timeout=5)  # never answered before
    assert reply["error"]["code"] == -32600 and "notification" in reply["error"]["message"]
    assert s.call("textDocument/didClose", {"textDocument": {"uri": URI}}, timeout=5)["error"]["code"] == -32600
    s.alive()
    finish(s)


def test_a_log_on_the_lsp_stream_itself_is_refused(server):
    s = server
    assert s.call("tabd/stats", {})["error"]["code"] == -32002  # the server reads: its stdout is set up
    fd = s.own_fd_of(s.proc.stdout)
    s.initialize({"log": f"/proc/self/fd/{fd}"})
    s.open(URI, "def f():\n    return 1\n")
    s.inline(URI, 1, 4)  # a completion event: it was a JSONL line in the LSP stream, outside any frame
    s.alive()
    assert any("LSP connection" in m["message"] for m in shown(s)), shown(s)
    finish(s)


def test_smaller_cases_are_bounded(server):
    s = server
    s.initialize({"editorInfo": {"name": "Neovim", "version": "0.11.4"},
                  "editorPluginInfo": {"name": "copilot-lsp", "version": "1"},
                  **{f"unknown{i}": i for i in range(1000)}})
    s.open(URI, "x = 1\n")
    for _ in range(5):  # each popped "Error in server" before
        s.notify("textDocument/copilotInlineEdit", {"textDocument": 5})
    huge = "file:///" + "x" * 10_000_000
    reply = s.call("tabd/document", {"uri": huge}, timeout=30)
    assert reply["error"]["code"] == -32602 and len(reply["error"]["message"]) <= 1100
    reply = s.call("textDocument/copilotInlineEdit", {"textDocument": {"uri": huge, "version": 1},
                                                       "position": {"line": 0, "character": 0}}, timeout=30)
    assert len(json.dumps(reply)) < 2000
    for chars in (-1, 10 ** 30, True, 2.5):
        reply = s.call("workspace/executeCommand", {"command": "tabd.accept", "arguments": ["id1", {"chars": chars}]})
        assert reply["error"]["code"] == -32602, (chars, reply)
    before = s.rss_kb()
    for i in range(10):  # 10 uris of 5 MB were all kept (30 held 160 MB)
        s.notify("tabd/setEnabled", {"enabled": False, "uri": f"file:///{i}" + "y" * 5_000_000})
    s.alive(timeout=30)
    assert s.rss_kb() - before < 20_000
    s.alive()
    messages = shown(s)
    assert not any("editorInfo" in m["message"] or "editorPluginInfo" in m["message"] for m in messages), messages
    assert len([m for m in messages if "unknown option" in m["message"]]) == 1
    assert len([m for m in messages if m["type"] == 1]) <= 1  # errors: at most the one for a bad notification
    assert all(len(m["message"]) < 600 for m in messages)
    finish(s)


def test_settings_changed_later_are_checked_like_initialization_options(server):
    s = server
    s.initialize()
    s.notify("workspace/didChangeConfiguration", {"settings": {"tabd": {"depth": "deep", "exclude": ["[z-a]"],
                                                                        "editorInfo": {}, "maxNewTokens": 8}}})
    s.notify("workspace/didChangeConfiguration", {"settings": {"python": {"analysis": 1}}})  # not tabd's: quiet
    s.notify("workspace/didChangeConfiguration", {"settings": None})
    s.alive()
    messages = [m["message"] for m in shown(s)]
    assert any("'depth' must be int" in m for m in messages), messages
    assert any("restarts: maxNewTokens" in m for m in messages), messages
    assert any("exclude glob ignored: '[z-a]'" in m for m in messages), messages
    assert len(messages) == 3, messages
    finish(s)


def test_other_requests_are_answered_while_git_is_asked_about_a_document(tmp_path):
    """`git check-ignore` ran on the event loop, up to its 1 s timeout per opened document; a git that takes its
    time (a big repository, a network file system) held every request behind it."""
    bin_dir, repo = tmp_path / "bin", tmp_path / "repo"
    bin_dir.mkdir()
    (repo / ".git").mkdir(parents=True)
    done = tmp_path / "git-done"
    git = bin_dir / "git"
    git.write_text(f"#!/bin/sh\nsleep 0.6\ntouch {done}\nexit 0\n")  # slow, and it says: ignored
    git.chmod(0o755)
    s = StrictServer(*ARGS, stderr=tmp_path / "stderr.txt",
                     env={"PATH": f"{bin_dir}:{__import__('os').environ['PATH']}"})
    try:
        s.initialize()
        uri = (repo / "build.py").as_uri()
        s.open(uri, "x = 1\n")
        s.alive()
        assert not done.exists()  # answered while git still ran (before: once it was done)
        reply = s.inline(uri, 0, 5)
        assert reply["result"]["tabd"]["reason"] == "excluded" and done.exists()  # the document waited for git
        finish(s)
    finally:
        s.close()


def test_include_gives_an_excluded_folder_back_but_never_a_secret(server):
    s = server
    s.result("initialize", {"processId": None, "rootUri": "file:///w", "capabilities": {},
                            "initializationOptions": {"exclude": ["vendor"], "include": ["vendor/mine/**"]}})
    s.notify("initialized", {})
    reasons = {}
    for name in ("vendor/theirs/lib.py", "vendor/mine/lib.py", "vendor/mine/.env.local"):
        uri = f"file:///w/{name}"
        s.open(uri, "x = 1\n")
        reasons[name] = s.inline(uri, 0, 5)["result"].get("tabd", {}).get("reason")
    assert reasons == {"vendor/theirs/lib.py": "excluded", "vendor/mine/lib.py": reasons["vendor/mine/lib.py"],
                       "vendor/mine/.env.local": "excluded"} and reasons["vendor/mine/lib.py"] != "excluded", reasons
    finish(s)


@pytest.mark.parametrize("flag", ["--log", "--record"])
def test_a_cli_log_or_recording_that_is_the_lsp_stream_itself_is_refused(flag):
    """`tabd serve --log /dev/stdout` wrote JSONL lines into the LSP stream outside any frame; it is refused at start."""
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "serve", flag, "/dev/stdout"], input=b"",
                          capture_output=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == b""
    assert b"LSP connection itself" in proc.stderr
