"""A tabd LSP server in this process, fed raw JSON-RPC values and read back from a capturing writer.

The real TabdServer and TabdProtocol (lsp/), with a fake backend unless a test gives one: what the transport would
hand them, they get; what they would write, the test reads."""
from __future__ import annotations

import asyncio
import json
import time

from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.lsp.server import build_server

from support.fakes import FakeBackend

INLINE = "textDocument/inlineCompletion"


def inline_params(uri: str = "file:///a.py", line: int = 0, character: int = 0) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}, "context": {"triggerKind": 2}}


def code_of(reply: dict) -> int:
    """The JSON-RPC error code of a reply that must be an error."""
    assert "error" in reply, reply
    return reply["error"]["code"]


class Capture:
    """A pygls writer that keeps what the server sends."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def write(self, data: bytes) -> None:
        self.sent.append(json.loads(data))

    def close(self) -> None:
        pass


class InProcess:
    def __init__(self, backend=None, config: Config | None = None) -> None:
        self.server = build_server(config or Config(), lambda c: backend or FakeBackend(), EventLog())
        self.out = Capture()
        self.server.protocol.set_writer(self.out, include_headers=False)
        self.exit_codes: list[int] = []
        self.server.protocol.on_exit = self.exit_codes.append

    def send(self, value) -> None:
        self.server.protocol.handle_value(value)

    def request(self, msg_id, method, params=None) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, **({"params": params} if params is not None else {})})

    def notify(self, method, params=None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    async def reply(self, msg_id, timeout: float = 5.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.out.sent:
                if m.get("id") == msg_id and "method" not in m:
                    return m
            await asyncio.sleep(0.01)
        raise TimeoutError(f"no reply to {msg_id}: {self.out.sent[-5:]}")

    async def initialize(self, options=None, encodings=None) -> None:
        caps = {"general": {"positionEncodings": encodings}} if encodings else {}
        self.request("init", "initialize", {"processId": None, "capabilities": caps,
                                            **({"initializationOptions": options} if options is not None else {})})
        assert "result" in await self.reply("init")
        self.notify("initialized", {})

    def open(self, text: str, uri: str = "file:///a.py") -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})

    def shown(self) -> list[dict]:
        """The window/showMessage params sent so far."""
        return [m["params"] for m in self.out.sent if m.get("method") == "window/showMessage"]

    def close(self) -> None:
        self.server.close()
