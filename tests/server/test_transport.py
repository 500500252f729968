"""Malformed transport through a real `tabd serve` over stdio, with raw bytes no LSP client library would send.

Broken Content-Length headers, invalid JSON, JSON that is not an object, a
50 MB message: each is answered or skipped, and the next well-formed message is
served. RawServer (below) is the small framing client the other hardening tests
import: Content-Length framing, responses read with timeouts.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tabd.lsp.protocol import Framer, id_in

from support.rawserver import RawServer, frame, serve_command

# -- the raw client ---------------------------------------------------------------------------








# -- the Framer alone (fast) --------------------------------------------------------------------


def messages(frames) -> list:
    return [f.value for f in frames if f.kind == "message"]


def test_framer_reads_well_formed_messages_split_anywhere():
    stream = frame({"a": 1}) + frame({"b": "é" * 10}) + frame({"c": [1, 2]})
    for cut in range(1, len(stream)):
        f = Framer()
        got = messages(f.feed(stream[:cut]) + f.feed(stream[cut:]))
        assert got == [{"a": 1}, {"b": "é" * 10}, {"c": [1, 2]}], cut


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n\r\n",  # lower case
    b"Content-Length:%d\r\n\r\n",  # no space
    b"Content-Length: %d\n\n",  # bare LF
    b"Content-Length:   %d  \r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",  # the other order
])
def test_framer_accepts_header_variants(header):
    body = json.dumps({"x": 1}).encode()
    f = Framer()
    frames = f.feed(header % len(body) + body + frame({"y": 2}))
    assert messages(frames) == [{"x": 1}, {"y": 2}]
    assert all(fr.kind == "message" and not fr.note for fr in frames)  # nothing to warn about


@pytest.mark.parametrize("bad", [
    b"Content-Length: abc\r\n\r\n{\"x\": 1}",  # not a number
    b"Content-Length: -5\r\n\r\n{\"x\": 1}",  # negative
    b"Content-Lenght: 8\r\n\r\n{\"x\": 1}",  # misspelt
    b"\r\n\r\n{\"x\": 1}",  # no header at all
    b"garbage line\r\n",
    b"Content-Length: 99999999999999999999\r\n\r\n",  # absurd
])
def test_framer_recovers_the_next_message_after_a_broken_header(bad):
    f = Framer()
    frames = f.feed(bad + frame({"next": True}))
    assert messages(frames)[-1] == {"next": True}


def test_framer_understated_and_overstated_lengths():
    body = json.dumps({"id": 7, "method": "m"}).encode()
    f = Framer()
    frames = f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) - 3) + body + frame({"next": 1}))
    assert [fr.kind for fr in frames][0] == "invalid" and id_in(frames[0].head) == 7
    assert messages(frames)[-1] == {"next": 1}
    f = Framer()
    frames = f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body + frame({"next": 2}) + frame({"n": 3}))
    assert messages(frames)[:3] == [{"id": 7, "method": "m"}, {"next": 2}, {"n": 3}]
    f = Framer()  # overstated and nothing follows: read once the client stalls
    assert f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body) == []
    assert messages(f.stalled()) == [{"id": 7, "method": "m"}]


def test_framer_skips_oversize_bodies_without_buffering_them():
    f = Framer(max_body=1000)
    head = b'{"jsonrpc": "2.0", "id": 3, "method": "big", "params": {"t": "'
    body = head + b"x" * (5000 - len(head) - 3) + b'"}}'
    frames = []
    data = b"Content-Length: 5000\r\n\r\n" + body + frame({"ok": 1})
    for i in range(0, len(data), 512):
        frames += f.feed(data[i:i + 512])
        assert len(f.buf) <= 1024
    assert [fr.kind for fr in frames] == ["oversize", "message"]
    assert id_in(frames[0].head) == 3


# -- a real server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = RawServer("--max-new-tokens", "4", stderr=tmp_path_factory.mktemp("transport") / "stderr.txt")
    s.initialize()
    yield s
    s.close()


def error_code(reply: dict) -> int:
    assert "error" in reply, reply
    return reply["error"]["code"]


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
    assert error_code(server.response(41)) == -32700
    server.send_bytes(frame(b"\xff\xfe not utf-8"))
    assert error_code(server.wait_for(lambda m: m.get("id") is None and "error" in m)) == -32700
    server.alive()


@pytest.mark.slow
@pytest.mark.parametrize("value", [b"42", b'"text"', b"null", b"[]", b'[{"jsonrpc": "2.0", "id": 1, "method": "tabd/stats"}]', b"true"])
def test_json_that_is_not_an_object_is_an_invalid_request(server: RawServer, value):
    server.send_bytes(frame(value))
    assert error_code(server.wait_for(lambda m: m.get("id") is None and "error" in m)) == -32600
    server.alive()


@pytest.mark.slow
def test_understated_and_overstated_content_length(server: RawServer):
    body = json.dumps({"jsonrpc": "2.0", "id": 51, "method": "tabd/stats", "params": {}}).encode()
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body)
    assert error_code(server.response(51)) == -32700  # the id is still found in the torn body
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
    assert error_code(reply) == -32600 and "limit" in reply["error"]["message"]
    server.alive()
    assert time.monotonic() - t0 < 60
    # a 50 MB didOpen is skipped too: the document is then not open, which requests say clearly
    server.send_bytes(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///big.py", "languageId": "python", "version": 1, "text": "y" * (50 << 20)}}}))
    assert error_code(server.call("tabd/document", {"uri": "file:///big.py"}, timeout=60)) == -32602
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


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JUNK = st.binary(max_size=200).map(lambda b: b.replace(b"C", b"_").replace(b"c", b"_"))  # no Content-Length in it


@settings(max_examples=400, deadline=None)
@given(junk=st.lists(JUNK, max_size=4), cuts=st.lists(st.integers(1, 64), max_size=20), payloads=st.lists(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=20)), max_size=3), min_size=1, max_size=4))
def test_framer_never_raises_and_recovers_the_well_formed_messages_after_junk(junk, cuts, payloads):
    stream = b"".join(j + b"\r\n" for j in junk) + b"".join(frame(p) for p in payloads)
    f = Framer()
    frames, pos = [], 0
    for cut in cuts:
        frames += f.feed(stream[pos:pos + cut])
        pos += cut
    frames += f.feed(stream[pos:])
    frames += f.stalled()
    got = messages(frames)
    assert got[len(got) - len(payloads):] == payloads
