"""Content-Length framing (lsp/framing.py): what `frame` writes, the server's framer and the blocking readers read
back whole, whatever the message holds; the readers take the header variants a server may send and stop at the end."""
from __future__ import annotations

import io
import json

import pytest

from tabd.lsp.framing import frame, read_frame, read_message
from tabd.lsp.protocol import Framer

MESSAGES = [{"jsonrpc": "2.0", "id": 1, "result": None},
            {"text": "naïve “quotes” 🙂 and\r\nline breaks"},  # the length counts bytes, not characters
            {"jsonrpc": "2.0", "method": "x", "params": {"deep": [[{"a": ""}]] * 50}}]


def test_what_frame_writes_the_blocking_reader_reads_back_message_by_message():
    stream = io.BytesIO(b"".join(frame(m) for m in MESSAGES))
    assert [read_message(stream) for _ in MESSAGES] == MESSAGES
    assert read_message(stream) is None  # the stream ended


def test_what_frame_writes_the_servers_framer_reads_back():
    frames = Framer().feed(b"".join(frame(m) for m in MESSAGES) + frame(MESSAGES[0], "application/vscode-jsonrpc"))
    assert [f.value for f in frames if f.kind == "message"] == [*MESSAGES, MESSAGES[0]]
    assert all(f.kind == "message" for f in frames)


def test_a_body_given_as_bytes_goes_as_it_is():
    body = b'{"a":  1}'
    assert frame(body) == b"Content-Length: 9\r\n\r\n" + body
    assert read_frame(io.BytesIO(frame(body))) == body


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n\r\n",
    b"Content-Length:%d\n\n",  # bare LF
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",
])
def test_the_blocking_reader_takes_header_variants(header):
    body = json.dumps({"x": "é"}).encode()
    assert read_message(io.BytesIO(header % len(body) + body + frame({"y": 2}))) == {"x": "é"}


def test_a_header_block_without_a_length_is_skipped_and_a_cut_body_is_the_end():
    body = frame({"after": True})
    assert read_message(io.BytesIO(b"Content-Type: text/plain\r\n\r\n" + body)) == {"after": True}
    assert read_frame(io.BytesIO(body[:-2])) is None  # the writer died mid-message: nothing half-read comes back
