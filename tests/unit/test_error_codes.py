"""Every request answered, and safe defaults.

First in-process (fast): the real TabdServer and TabdProtocol with a fake
backend, fed JSON values as the transport would, responses captured. Then a
real `tabd serve` over stdio (slow): the same failure paths end to end, a model
that fails to load, initializationOptions validation shown to the user,
listeners on loopback only, no source text in the log.

Over 500 lines: one list of failure paths, in process and then end to end.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.lsp.server import build_server
from tabd.predictor.types import Prediction
from support.fakes import FakeBackend
from support.inprocess import InProcess
from support.rawserver import RawServer, serve_command

MODEL_DIR = Path(__file__).resolve().parents[2] / "predictor" / "model"

# -- in-process ----------------------------------------------------------------------------------


INLINE = "textDocument/inlineCompletion"


def inline_params(uri="file:///a.py", line=0, character=0) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}, "context": {"triggerKind": 2}}


@pytest.fixture
async def srv():
    s = InProcess()
    yield s
    s.close()


def code_of(reply: dict) -> int:
    assert "error" in reply, reply
    return reply["error"]["code"]


async def test_requests_before_initialize_are_refused_and_notifications_dropped(srv: InProcess):
    srv.request(1, "tabd/stats", {})
    assert code_of(await srv.reply(1)) == -32002
    srv.request(2, INLINE, inline_params())
    assert code_of(await srv.reply(2)) == -32002
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x"}})
    await srv.initialize()
    srv.request(3, "tabd/document", {"uri": "file:///a.py"})
    assert code_of(await srv.reply(3)) == -32602  # the early didOpen was dropped, as LSP says
    srv.request(4, "initialize", {"processId": None, "capabilities": {}})
    assert code_of(await srv.reply(4)) == -32600  # initialize only once


@pytest.mark.parametrize("params", [
    None,  # missing
    {},  # missing fields
    {"textDocument": {"uri": "file:///a.py"}},  # no position
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": "zero", "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": -1, "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": 7}, "position": {"line": 0, "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}, "context": {"triggerKind": 99}},
    [1, 2, 3],  # an array
    "a string",  # not structured at all
])
async def test_params_that_do_not_parse_are_invalid_params(srv: InProcess, params):
    await srv.initialize()
    srv.request(10, INLINE, params)
    assert code_of(await srv.reply(10)) == -32602


@pytest.mark.parametrize("message,code", [
    ({"jsonrpc": "2.0", "id": 20, "method": 5}, -32600),  # method not a string
    ({"id": 21, "method": "tabd/stats"}, -32600),  # no jsonrpc
    ({"jsonrpc": "1.0", "id": 22, "method": "tabd/stats"}, -32600),
    ({"jsonrpc": "2.0", "id": 23, "method": "no/such/method", "params": {}}, -32601),
    ({"jsonrpc": "2.0", "id": 24, "method": "$/no-such", "params": {}}, -32601),
])
async def test_malformed_requests_get_their_codes(srv: InProcess, message, code):
    await srv.initialize()
    srv.send(message)
    assert code_of(await srv.reply(message["id"])) == code


@pytest.mark.parametrize("msg_id", [1.5, True, {"a": 1}, [1]])
async def test_a_bad_id_is_answered_with_a_null_id(srv: InProcess, msg_id):
    await srv.initialize()
    srv.send({"jsonrpc": "2.0", "id": msg_id, "method": "tabd/stats"})
    assert code_of(await srv.reply(None)) == -32600


async def test_unknown_notifications_and_cancellations_are_ignored_quietly(srv: InProcess):
    await srv.initialize()
    before = len(srv.out.sent)
    srv.notify("no/such/notification", {})
    srv.notify("$/cancelRequest", {"id": 987654})
    srv.notify("$/cancelRequest", {})  # malformed: dropped
    srv.notify("$/cancelRequest", None)
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///never.py", "version": 2}, "contentChanges": [{"text": "x"}]})
    srv.notify("textDocument/didChange", {"garbage": True})
    srv.request(30, "tabd/stats", {})
    assert "result" in await srv.reply(30)
    assert len(srv.out.sent) == before + 1  # nothing but the stats reply


async def test_documents_never_opened_are_invalid_params(srv: InProcess):
    await srv.initialize()
    srv.request(40, INLINE, inline_params("file:///never.py"))
    assert code_of(await srv.reply(40)) == -32602
    srv.request(41, "tabd/document", {"uri": "file:///never.py"})
    assert code_of(await srv.reply(41)) == -32602
    srv.request(42, "tabd/document", {})
    assert code_of(await srv.reply(42)) == -32602
    srv.request(43, "textDocument/completion", {"textDocument": {"uri": "file:///never.py"}, "position": {"line": 0, "character": 0}})
    assert code_of(await srv.reply(43)) == -32602


async def test_notifications_leave_nothing_behind(srv: InProcess):
    """pygls keeps a finished Future per generator-handled notification forever: 20k keystrokes, 20k Futures."""
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": ""}})
    for v in range(2, 502):
        srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": v}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]})
        srv.notify("$/setTrace", {"value": "off"})
    srv.request(45, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(45))["result"]["text"] == "x" * 500
    srv.notify("textDocument/didClose", {"textDocument": {"uri": "file:///a.py"}})
    await asyncio.sleep(0.05)
    assert len(srv.server.protocol._request_futures) == 0


async def test_a_recording_that_fails_stops_with_a_message_and_edits_still_apply(srv: InProcess):
    class FullDisk:
        def record(self, event):
            raise OSError(28, "No space left on device")

    srv.server.recorder = FullDisk()
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "ab"}})
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 1}}, "text": "X"}]})
    srv.request(46, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(46))["result"]["text"] == "aXb"
    shown = [m["params"]["message"] for m in srv.out.sent if m.get("method") == "window/showMessage"]
    assert len(shown) == 1 and "No space left" in shown[0]


async def test_an_exception_inside_a_handler_is_an_internal_error(srv: InProcess):
    @srv.server.feature("test/boom")
    def boom(ls, params):
        raise RuntimeError("handler bug")

    @srv.server.feature("test/boom-async")
    async def boom_async(ls, params):
        await asyncio.sleep(0)
        raise KeyError("async handler bug")

    await srv.initialize()
    srv.request(50, "test/boom", {})
    assert code_of(await srv.reply(50)) == -32603
    srv.request(51, "test/boom-async", {})
    assert code_of(await srv.reply(51)) == -32603
    srv.request(52, "tabd/stats", {})
    assert "result" in await srv.reply(52)


async def test_bad_command_arguments_are_invalid_params(srv: InProcess):
    await srv.initialize()
    for i, args in enumerate([[], [{"x": 1}], ["id", "not an object"], [True]]):
        srv.request(60 + i, "workspace/executeCommand", {"command": "tabd.accept", "arguments": args})
        assert code_of(await srv.reply(60 + i)) == -32602
    srv.request(70, "workspace/executeCommand", {"command": "no.such.command", "arguments": []})
    assert code_of(await srv.reply(70)) == -32602


async def test_a_cancelled_request_is_answered_request_cancelled():
    srv = InProcess(FakeBackend(delay=2.0))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "def f():\n    "}})
        srv.request(80, INLINE, inline_params(line=1, character=4))
        await asyncio.sleep(0.1)
        srv.notify("$/cancelRequest", {"id": 80})
        t0 = time.monotonic()
        assert code_of(await srv.reply(80)) == -32800
        assert time.monotonic() - t0 < 1.0
    finally:
        srv.close()


async def test_a_model_too_slow_to_answer_is_an_empty_result_in_bounded_time(monkeypatch):
    import tabd.lsp.server as server_module

    monkeypatch.setattr(server_module, "REQUEST_TIMEOUT_S", 0.3)
    srv = InProcess(FakeBackend(delay=5.0))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        t0 = time.monotonic()
        srv.request(92, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(92))["result"] == {"items": []}
        assert time.monotonic() - t0 < 2.0
    finally:
        srv.close()


async def test_a_model_error_is_an_empty_result():
    srv = InProcess(FakeBackend(fail=True))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        srv.request(90, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(90))["result"] == {"items": []}
    finally:
        srv.close()


async def test_a_model_that_cannot_load_is_shown_to_the_user():
    def factory(config):
        raise OSError("weights are corrupt")

    srv = InProcess()
    srv.server.backend_factory = factory
    try:
        await srv.initialize()
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        srv.request(91, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(91))["result"] == {"items": []}
        shown = [m for m in srv.out.sent if m.get("method") == "window/showMessage"]
        assert shown and shown[0]["params"]["type"] == 1 and "weights are corrupt" in shown[0]["params"]["message"]
    finally:
        srv.close()


async def test_requests_after_shutdown_are_refused_and_exit_says_how(srv: InProcess):
    await srv.initialize()
    srv.request(100, "shutdown")
    assert (await srv.reply(100))["result"] is None
    assert not [t for t in threading.enumerate() if t.name.startswith("tabd-model")]  # no worker left behind
    srv.request(101, "tabd/stats", {})
    assert code_of(await srv.reply(101)) == -32600
    srv.request(102, "shutdown")
    assert code_of(await srv.reply(102)) == -32600
    srv.notify("exit")
    assert srv.exit_codes == [0]


async def test_exit_without_shutdown_is_code_1(srv: InProcess):
    await srv.initialize()
    srv.notify("exit")
    assert srv.exit_codes == [1]


@pytest.mark.parametrize("options,expected", [
    ({"depth": "deep"}, ["'depth' must be int"]),
    ({"depth": 99}, ["depth must be between 0 and 8"]),
    ({"maxNewTokens": 0, "prefixChars": True}, ["max_new_tokens must be between", "'prefixChars' must be int"]),
    ({"speculation": "yes"}, ["'speculation' must be bool"]),
    ({"device": "tpu"}, ["device must be auto, cpu or cuda"]),
    ({"threads": 1000}, ["threads must be an integer between 1 and 256"]),
    ({"noSuchOption": 1}, ["unknown option 'noSuchOption'"]),
    ([1, 2], ["initializationOptions must be an object"]),
    ({"log": "/nonexistent-dir/tabd.jsonl"}, ["/nonexistent-dir/tabd.jsonl"]),
])
async def test_bad_initialization_options_are_shown_and_defaults_kept(options, expected):
    srv = InProcess()
    try:
        await srv.initialize(options)
        await asyncio.sleep(0.05)
        shown = [m["params"]["message"] for m in srv.out.sent if m.get("method") == "window/showMessage"]
        for text in expected:
            assert any(text in s for s in shown), (text, shown)
        c = srv.server.config
        assert (c.depth, c.max_new_tokens, c.prefix_chars, c.speculation, c.device, c.threads, c.log) == (
            4, 48, 2400, True, "auto", None, None)  # the depth ceiling's default
    finally:
        srv.close()


async def test_good_initialization_options_apply_quietly(srv: InProcess, tmp_path):
    log = tmp_path / "client.jsonl"
    await srv.initialize({"depth": 1, "maxNewTokens": 8, "speculation": False, "log": str(log)})
    await asyncio.sleep(0.05)
    assert not [m for m in srv.out.sent if m.get("method") == "window/showMessage" and m["params"]["type"] != 1]
    assert (srv.server.config.depth, srv.server.config.max_new_tokens, srv.server.config.speculation) == (1, 8, False)
    assert log.exists() and (log.stat().st_mode & 0o777) == 0o600


# -- a real server over stdio --------------------------------------------------------------------


@pytest.mark.slow
def test_real_server_answers_every_failure_path(tmp_path):
    s = RawServer("--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    try:
        assert s.call("tabd/stats", {})["error"]["code"] == -32002
        s.initialize({"depth": "deep", "maxNewTokens": 4})
        shown = s.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
        assert shown["type"] == 2 and "'depth' must be int" in shown["message"]
        cases = [
            ({"jsonrpc": "2.0", "id": 1, "method": INLINE, "params": {"textDocument": {}}}, -32602),
            ({"jsonrpc": "2.0", "id": 2, "method": INLINE, "params": inline_params("file:///never.py")}, -32602),
            ({"jsonrpc": "2.0", "id": 3, "method": "no/such"}, -32601),
            ({"jsonrpc": "2.0", "id": 4, "method": 3}, -32600),
            ({"id": 5, "method": "tabd/stats"}, -32600),
        ]
        for message, code in cases:
            s.send(message)
            assert s.response(message["id"])["error"]["code"] == code, message
        s.notify("$/cancelRequest", {"id": 424242})
        s.alive()
        assert s.shutdown_exit() == 0
    finally:
        s.close()


def broken_model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "broken-model"
    d.mkdir()
    for f in MODEL_DIR.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, d / f.name)
    (d / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}" + b"\0" * 100)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["broken-safetensors", "pickle-only", "remote-code"])
def test_a_model_that_cannot_load_gives_empty_results_and_a_message(tmp_path, kind):
    d = broken_model_dir(tmp_path)
    if kind == "pickle-only":
        (d / "model.safetensors").unlink()
        (d / "pytorch_model.bin").write_bytes(b"not loaded: tabd loads safetensors only")
    elif kind == "remote-code":
        (d / "model.safetensors").write_bytes((MODEL_DIR / "model.safetensors").read_bytes())
        config = json.loads((d / "config.json").read_text())
        config["auto_map"] = {"AutoModelForCausalLM": "evil.Model"}
        (d / "config.json").write_text(json.dumps(config))
        (d / "evil.py").write_text("raise SystemExit('remote code ran')\n")
    s = RawServer("--model", str(d), "--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    try:
        s.initialize()
        s.open("file:///m.py", "import os\nos.")
        t0 = time.monotonic()
        assert s.inline("file:///m.py", 1, 3, timeout=120)["result"] == {"items": []}
        assert time.monotonic() - t0 < 120
        message = s.wait_for(lambda m: m.get("method") == "window/showMessage", timeout=30)["params"]
        assert message["type"] == 1 and "could not be loaded" in message["message"]
        expected = {"broken-safetensors": "header", "pickle-only": "safetensors only", "remote-code": "--trust-remote-code"}[kind]
        assert expected in message["message"]
        s.alive()
        assert s.shutdown_exit() == 0
    finally:
        s.close()


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
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
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


IDENT = "qzx_secret_ident_7781"


@pytest.mark.slow
@pytest.mark.parametrize("log_text", [False, True])
def test_the_log_holds_no_source_text_unless_asked(tmp_path, log_text):
    log = tmp_path / "tabd.jsonl"
    # --min-confidence 0: what is under test is the log, so every suggestion must be shown and logged
    args = ["--log", str(log), "--max-new-tokens", "6", "--min-confidence", "0"] + (["--log-text"] if log_text else [])
    s = RawServer(*args, stderr=tmp_path / "stderr.txt")
    try:
        s.initialize()
        uri = f"file:///w/{IDENT}.py"
        text = f"def {IDENT}(x):\n    return x\n\n"
        s.open(uri, text)
        line, col, version = 3, 0, 1
        typed = IDENT[:5]
        for ch in typed:  # type it, asking for a suggestion after each key
            version += 1
            s.change(uri, version, [{"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}}, "text": ch}])
            col += 1
            reply = s.inline(uri, line, col, timeout=120)
            assert "result" in reply
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    content = log.read_text()
    events = [json.loads(x) for x in content.splitlines()]
    assert sum(e["event"] == "completion" for e in events) == len(typed)
    assert IDENT not in content and "file:///" not in content
    if log_text:
        assert any("text" in e for e in events if e["event"] == "completion")
    else:
        assert not any("text" in e for e in events)


@pytest.mark.slow
def test_bench_soak_reports_rss_and_a_bounded_cache():
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "soak", "--requests", "120", "--soak-max-new-tokens", "4", "--json"],
                       capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    soak = json.loads(r.stdout.strip().splitlines()[-1])["soak"]
    assert soak["requests"] == 120 and soak["exit_code"] == 0
    assert {"rss_start_mb", "rss_end_mb", "rss_growth_pct", "cache_bytes_max", "cache_bytes_bound"} <= set(soak)
    assert 0 < soak["rss_start_mb"] and 0 < soak["rss_end_mb"]
    assert 0 <= soak["cache_bytes_max"] <= soak["cache_bytes_bound"]


async def test_a_plain_path_handler_that_fails_is_not_run_again(srv: InProcess):
    """A Tab's messages are handled on plain JSON (lsp/rawparams.py); a handler that fails there may have applied its edit
    already, so it is reported, not handed to the structured path to apply a second time."""
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "ab"}})
    apply = srv.server.apply_changes

    def apply_then_fail(*args):
        apply(*args)
        raise RuntimeError("bug after the edit")

    srv.server.apply_changes = apply_then_fail
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 1}}, "text": "X"}]})
    srv.server.apply_changes = apply
    srv.request(90, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(90))["result"]["text"] == "aXb"  # once

    srv.server.protocol.plain = {**srv.server.protocol.plain, INLINE: lambda params: 1 / 0}
    srv.request(91, INLINE, inline_params(line=0, character=3))
    assert code_of(await srv.reply(91)) == -32603
