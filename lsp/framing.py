"""Content-Length framing, JSON-RPC's base protocol: how one message goes on the wire, and how a blocking reader
takes one off a pipe.

A message is a header block, `Content-Length: N` (the body's length in bytes, not characters) and optionally
`Content-Type`, each line ended by \\r\\n and the block by an empty line, then N bytes of UTF-8 JSON. Everything
that writes a frame (the server, its clients, the benches, the tests' helpers) calls `frame`; the blocking clients
read with `read_frame`. The server reads through its own tolerant framer (protocol.py), which recovers from broken
headers that these readers, talking to tabd, never meet.
"""
from __future__ import annotations

import json
from typing import IO, Any


def frame(message: Any, content_type: str = "") -> bytes:
    """`message` (a JSON value, or a body already encoded as bytes) framed for the wire; `content_type`: the
    Content-Type header's value, none when empty."""
    body = message if isinstance(message, bytes) else json.dumps(message, separators=(",", ":")).encode("utf-8")
    typed = b"Content-Type: %s\r\n" % content_type.encode() if content_type else b""
    return b"Content-Length: %d\r\n%s\r\n%s" % (len(body), typed, body)


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next message's body from a blocking stream; None once it ends. Header names are read in any case and
    lines may end with a bare \\n; a header block without Content-Length is skipped."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                return None
            if not line.strip():
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            continue
        body = stream.read(length)
        return body if len(body) == length else None


def read_message(stream: IO[bytes]) -> Any:
    """The next message from a blocking stream, parsed; None once it ends."""
    body = read_frame(stream)
    return None if body is None else json.loads(body)
