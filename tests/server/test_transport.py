"""Malformed transport through a real `tabd serve` over stdio, with raw bytes no LSP client library would send.

Broken Content-Length headers, invalid JSON, JSON that is not an object, a
50 MB message: each is answered or skipped, and the next well-formed message is
served. The framing client is RawServer (tests/support/rawserver.py).
"""
from __future__ import annotations

import json
import time

import pytest

from support.inprocess import code_of
from support.rawserver import RawServer, frame

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = RawServer("--max-new-tokens", "4", stderr=tmp_path_factory.mktemp("transport") / "stderr.txt")
    s.initialize()
    yield s
    s.close()


@pytest.mark.slow
def test_broken_headers_are_skipped_and_the_next_message_served(server: RawServer):
    for bad in [b"Content-Length: abc\r\n\r\n{}", b"Content-Length: -1\r\n\r\n", b"no header here\r\n",
                b"Content-Length: 99999999999999999999\r\n\r\n", b"\r\n\r\n\r\n", b"Content-Type: x\r\n\r\n"]:
        server.send_bytes(bad)
        server.alive()
    assert "transport:" in server.stderr_path.read_text()  # what was skipped is logged


@pytest.mark.slow
def test_header_variants_are_served(server: RawServer):
    body = json.dumps({"jsonrpc": "2.0", "id": "v1", "method": "tabd/stats", "params": {}}).encode()
    server.send_bytes(b"content-length:%d\n\n" % len(body) + body)
    assert "result" in server.response("v1")


@pytest.mark.slow
def test_a_request_with_a_broken_header_is_still_answered(server: RawServer):
    body = json.dumps({"jsonrpc": "2.0", "id": "broken", "method": "tabd/stats", "params": {}}).encode()
    server.send_bytes(b"Content-Length: twelve\r\n\r\n" + body)
    assert "result" in server.response("broken", timeout=10)
    server.alive()


@pytest.mark.slow
def test_invalid_json_is_a_parse_error(server: RawServer):
    server.send_bytes(frame(b'{"jsonrpc": "2.0", "id": 41, "method": "tabd/stats", "params": {'))
    assert code_of(server.response(41)) == -32700
    server.send_bytes(frame(b"\xff\xfe not utf-8"))
    assert code_of(server.wait_for(lambda m: m.get("id") is None and "error" in m)) == -32700
    server.alive()


@pytest.mark.slow
@pytest.mark.parametrize("value", [b"42", b'"text"', b"null", b"[]", b'[{"jsonrpc": "2.0", "id": 1, "method": "tabd/stats"}]', b"true"])
def test_json_that_is_not_an_object_is_an_invalid_request(server: RawServer, value):
    server.send_bytes(frame(value))
    assert code_of(server.wait_for(lambda m: m.get("id") is None and "error" in m)) == -32600
    server.alive()


@pytest.mark.slow
def test_understated_and_overstated_content_length(server: RawServer):
    body = json.dumps({"jsonrpc": "2.0", "id": 51, "method": "tabd/stats", "params": {}}).encode()
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body)
    assert code_of(server.response(51)) == -32700  # the id is still found in the torn body
    server.alive()
    body = json.dumps({"jsonrpc": "2.0", "id": 52, "method": "tabd/stats", "params": {}}).encode()
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) + 100) + body)
    assert "result" in server.response(52, timeout=10)  # read once the client stops sending
    server.alive()


@pytest.mark.slow
def test_a_50_mb_message_is_skipped_and_its_request_answered(server: RawServer):
    text = "x = 1\n" * (50 * 1024 * 1024 // 6)
    msg = {"jsonrpc": "2.0", "id": 61, "method": "textDocument/inlineCompletion",
           "params": {"textDocument": {"uri": "file:///big.py"}, "position": {"line": 0, "character": 0},
                      "context": {"triggerKind": 2}, "pad": text}}
    data = frame(msg)
    assert len(data) > 50_000_000
    del text, msg
    t0 = time.monotonic()
    server.send_bytes(data)
    reply = server.response(61, timeout=60)
    assert code_of(reply) == -32600 and "limit" in reply["error"]["message"]
    server.alive()
    assert time.monotonic() - t0 < 60
    # a 50 MB didOpen is skipped too: the document is then not open, which requests say clearly
    server.send_bytes(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///big.py", "languageId": "python", "version": 1, "text": "y" * (50 << 20)}}}))
    assert code_of(server.call("tabd/document", {"uri": "file:///big.py"}, timeout=60)) == -32602
    shown = server.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
    assert "too large" in shown["message"]


@pytest.mark.slow
def test_a_large_message_under_the_limit_is_served(server: RawServer):
    text = "z = 'é😀'\n" * 200_000  # about 3 MB
    server.open("file:///large.py", text)
    assert server.document("file:///large.py", timeout=30)["text"] == text


@pytest.mark.slow
def test_the_server_still_serves_a_session_after_all_that(server: RawServer):
    server.open("file:///after.py", "def f():\n    return ")
    reply = server.inline("file:///after.py", 1, 11)
    assert "result" in reply and "items" in reply["result"]
