"""An LSP client for the tools that drive `tabd serve` (replay, demo): plain dicts and dataclasses on the outside.

It speaks JSON-RPC over the child's stdio itself, on plain JSON: no pygls
client and no lsprotocol/cattrs structuring. Measured on replay's after-accept
round trip, pygls' client spent about as long serialising a Tab's three
messages and structuring the answer as the server spent answering (README,
"Speculation that follows what you accept"). Positions and ranges are
LSP-shaped dicts ({"line", "character"}, {"start", "end"}) in UTF-16 units;
answers come back as Suggestion objects and plain dicts.

Answers arrive on the child's stdout pipe and are parsed in the pipe's own
callback: a request's future is resolved as soon as its response frame has been
read and parsed as JSON (what replay's latency stamps), with no loop turn or
stream reader in between.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tabd.lsp.args import plain
from tabd.lsp.framing import frame

logger = logging.getLogger(__name__)

CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)", re.IGNORECASE)
FULL_SYNC = 1  # TextDocumentSyncKind.Full
INVOKED, AUTOMATIC = 1, 2  # InlineCompletionTriggerKind
METHOD_NOT_FOUND = -32601


class ResponseError(Exception):
    """The server answered a request with an error (RequestCancelled -32800 for a cancelled one)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code, self.message, self.data = code, message, data


class ConnectionGone(Exception):
    """The server's stdout closed before the request was answered."""


@dataclass(frozen=True)
class Suggestion:
    """One inline completion item: its text, where it goes, and the id its accept command carries."""

    text: str
    range: dict[str, Any] | None  # {"start": pos, "end": pos}, or None when the item gave none
    item_id: Any = None  # the first argument of its command (tabd.accept's item id)


def suggestions(result: Any) -> list[Suggestion]:
    """The non-empty suggestions of an inlineCompletion result (an InlineCompletionList, a list of items, or null)."""
    items = result.get("items") if isinstance(result, dict) else result if isinstance(result, list) else None
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        text = item.get("insertText")
        if isinstance(text, dict):  # a StringValue (snippet)
            text = text.get("value")
        if not isinstance(text, str) or not text:
            continue
        rng, command = item.get("range"), item.get("command")
        rng = rng if isinstance(rng, dict) else None
        arguments = command.get("arguments") if isinstance(command, dict) else None
        args = arguments if isinstance(arguments, list) else None
        out.append(Suggestion(text, rng, args[0] if args else None))
    return out


@dataclass(frozen=True)
class InlineEdit:
    """One next-edit suggestion: `text` replaces `range` of document `uri` at `version`; `command` accepts it."""

    text: str
    range: dict[str, Any]
    uri: str | None
    version: int | None
    command: dict[str, Any] | None

    @property
    def item_id(self) -> Any:
        args = (self.command or {}).get("arguments")
        return args[0] if isinstance(args, list) and args else None


def _is_position(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
                                           for k in ("line", "character"))


def inline_edits(result: Any) -> list[InlineEdit]:
    """The well-formed edits of a copilotInlineEdit result (`{"edits": [...]}`, or null); malformed ones are dropped."""
    edits = result.get("edits") if isinstance(result, dict) else None
    out = []
    for edit in edits if isinstance(edits, list) else []:
        if not isinstance(edit, dict) or not isinstance(edit.get("text"), str):
            continue
        rng = edit.get("range")
        if not isinstance(rng, dict) or not _is_position(rng.get("start")) or not _is_position(rng.get("end")):
            continue
        doc = edit.get("textDocument")
        doc = doc if isinstance(doc, dict) else {}
        version, uri = doc.get("version"), doc.get("uri")
        command = edit.get("command") if isinstance(edit.get("command"), dict) else None
        out.append(InlineEdit(edit["text"], rng, uri if isinstance(uri, str) else None,
                              version if isinstance(version, int) and not isinstance(version, bool) else None, command))
    return out


class Frames:
    """Cuts the server's byte stream into JSON messages (sans I/O: feed bytes, get values)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.length: int | None = None

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        out: list[Any] = []
        while True:
            if self.length is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return out
                match = CONTENT_LENGTH.search(self.buf, 0, end)
                length = int(match.group(1)) if match is not None else None  # read before the buffer moves
                del self.buf[: end + 4]
                if length is None:
                    logger.warning("a header block without Content-Length from the server: skipped")
                    continue
                self.length = length
            if len(self.buf) < self.length:
                return out
            body = bytes(self.buf[: self.length])
            del self.buf[: self.length]
            self.length = None
            try:
                out.append(json.loads(body))
            except ValueError as exc:
                logger.warning("a message from the server is not JSON: %s", exc)


class _Pipes(asyncio.subprocess.SubprocessStreamProtocol):
    """The child's pipes as asyncio gives them (stderr and wait() as usual), but stdout straight to the wire."""

    def __init__(self, wire: "Wire", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._wire = wire

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd == 1 and isinstance(data, bytes):  # always bytes: the pipes are binary
            self._wire.received(data)
        else:
            super().pipe_data_received(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._wire.closed()
        super().pipe_connection_lost(fd, exc)


class Wire:
    """JSON-RPC over a child's stdio: frames out and in, the requests waiting for their response, what the server
    sends unasked, and what fails once its output closes."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self.frames = Frames()
        self.pending: dict[int | str | None, Future[Any]] = {}  # by id (None: a response's null id finds none)
        self.gone = False  # the server's output closed
        self.ended = False  # ...and what was pending has failed
        # what the server sent unasked (window/showMessage, ...), last 100
        self.notifications: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> bool:
        """Write one message; False when the server is gone (the caller's request then fails; a notification to a
        dead server is dropped, as a write into its closed pipe would be: callers watch the process for its death)."""
        process = self.process
        if process is None or process.stdin is None:
            raise ConnectionGone("the server was never started")
        if self.gone or process.stdin.is_closing():
            return False
        process.stdin.write(frame(message))
        return True

    def received(self, data: bytes) -> None:
        for message in self.frames.feed(data):
            if isinstance(message, dict):
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # a response
            future = self.pending.pop(message.get("id"), None)
            if future is None or future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                future.set_exception(ResponseError(error.get("code", 0), str(error.get("message", "")), error.get("data")))
            else:
                future.set_result(message.get("result"))
        elif "id" in message:  # a request from the server: this client offers none of them
            self.send({"jsonrpc": "2.0", "id": message["id"],
                       "error": {"code": METHOD_NOT_FOUND, "message": f"{message['method']} is not supported"}})
        else:
            self.notifications.append(message)
            del self.notifications[:-100]

    def closed(self) -> None:
        """The server's stdout closed: what is pending fails once the process has exited (at most 5 s on), so that a
        caller who watches the process sees the death before the failed answers."""
        if self.gone:
            return
        self.gone = True
        try:
            asyncio.get_running_loop().create_task(self._fail_at_exit())
        except RuntimeError:  # no loop: nothing to wait with
            self.fail_pending()

    async def _fail_at_exit(self) -> None:
        if self.process is not None:
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except (asyncio.TimeoutError, OSError):
                pass
        self.fail_pending()

    def fail_pending(self) -> None:
        self.ended = True
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionGone("the server closed its output"))


class Client:
    """A `tabd serve` (or any LSP server) child over stdio, spoken to in plain values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.wire = Wire()
        self._ids = itertools.count(1)
        self.notifications = self.wire.notifications  # what the server sent unasked (window/showMessage, ...)
        self.capabilities: dict[str, Any] = {}  # the server's, from its initialize result

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self.wire.process

    async def start(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Pipes(self.wire, limit=2**16, loop=loop), *argv, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self.wire.process = asyncio.subprocess.Process(transport, protocol, loop)

    async def initialize(self, root_uri: str | None = None) -> bool:
        """initialize (UTF-16, inline completion, executeCommand; the workspace at `root_uri`, if any); True when the
        server takes incremental changes."""
        capabilities = {
            "textDocument": {"synchronization": {"dynamicRegistration": False},
                             "inlineCompletion": {"dynamicRegistration": False}},
            "workspace": {"executeCommand": {}},
            "general": {"positionEncodings": ["utf-16"]},
        }
        result = await self.call("initialize", {"processId": os.getpid(), "rootUri": root_uri, "capabilities": capabilities,
                                                "clientInfo": {"name": self.name, "version": "1"}})
        self.notify("initialized", {})
        offered = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities = offered if isinstance(offered, dict) else {}
        sync = self.capabilities.get("textDocumentSync")
        kind = sync.get("change") if isinstance(sync, dict) else sync
        return kind != FULL_SYNC

    # -- documents --------------------------------------------------------------

    def open(self, uri: str, language: str, version: int, text: str) -> None:
        self.notify("textDocument/didOpen",
                    {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}})

    def change(self, uri: str, version: int, rng: dict[str, Any] | None, text: str) -> None:
        """One content change: `text` replaces `rng`, or the whole document when rng is None."""
        change = {"range": {"start": dict(rng["start"]), "end": dict(rng["end"])}, "text": text} if rng is not None \
            else {"text": text}
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})

    def close(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    # -- requests ---------------------------------------------------------------

    def inline_completion(self, uri: str, position: dict[str, int], msg_id: int | None = None,
                          invoked: bool = False) -> Future[Any]:
        """Send textDocument/inlineCompletion; the future's result goes through suggestions()."""
        params = {"context": {"triggerKind": INVOKED if invoked else AUTOMATIC}, "textDocument": {"uri": uri},
                  "position": {"line": position["line"], "character": position["character"]}}
        return self.request("textDocument/inlineCompletion", params, msg_id=msg_id)

    def offers_inline_edits(self) -> bool:
        """Whether the server advertised `textDocument/copilotInlineEdit` (capabilities.experimental.copilotInlineEdit)."""
        experimental = self.capabilities.get("experimental")
        return isinstance(experimental, dict) and experimental.get("copilotInlineEdit") is True

    def inline_edit(self, uri: str, version: int, position: dict[str, int],
                    msg_id: int | None = None) -> Future[Any]:
        """Send textDocument/copilotInlineEdit (GitHub Copilot's shape); the future's result goes through inline_edits()."""
        params = {"textDocument": {"uri": uri, "version": version},
                  "position": {"line": position["line"], "character": position["character"]}}
        return self.request("textDocument/copilotInlineEdit", params, msg_id=msg_id)

    def did_show_inline_edit(self, command: dict[str, Any]) -> None:
        self.notify("textDocument/didShowInlineEdit", {"item": {"command": command}})

    async def suggest(self, uri: str, position: dict[str, int]) -> list[Suggestion]:
        return suggestions(await asyncio.wrap_future(self.inline_completion(uri, position)))

    def cancel(self, msg_id: int | str) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    def request(self, method: str, params: Any, msg_id: int | str | None = None) -> Future[Any]:
        """A request; the future holds its result as plain JSON, or ResponseError / ConnectionGone."""
        future: Future[Any] = Future()
        msg_id = f"c{next(self._ids)}" if msg_id is None else msg_id  # our own ids never meet the caller's numbers
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        wire = self.wire
        wire.pending[msg_id] = future
        try:
            sent = wire.send(message)
        except (ConnectionError, RuntimeError) as exc:
            sent, why = False, str(exc)
        else:
            why = "the server closed its output"
        if not sent and (wire.ended or not wire.gone):
            wire.pending.pop(msg_id, None)
            future.set_exception(ConnectionGone(why))
        return future  # (a request to a server whose output just closed fails with the rest, at its exit)

    async def call(self, method: str, params: Any) -> Any:
        return plain(await asyncio.wrap_future(self.request(method, params)))

    def notify(self, method: str, params: Any) -> None:
        """A notification (didChange, tabd/focus, ...)."""
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        try:
            self.wire.send(message)
        except (ConnectionError, RuntimeError):
            pass  # the pipe broke under us: the process watch reports the death

    def execute_command(self, command: str, arguments: list[Any]) -> Future[Any]:
        return self.request("workspace/executeCommand", {"command": command, "arguments": arguments})

    # -- the end ----------------------------------------------------------------

    async def shutdown(self) -> None:
        """shutdown, then exit: the polite end."""
        await asyncio.wrap_future(self.request("shutdown", None))
        self.notify("exit", None)

    async def stop(self, timeout: float = 10.0) -> None:
        """Close our end of the child's stdin and wait for the process to end (killed after `timeout` s), so that
        its pipes are closed before the caller's loop is."""
        self.abandon()
        process = self.wire.process
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        await asyncio.sleep(0)  # the transport's last callbacks (pipes lost) run now

    def abandon(self) -> None:
        """Fail what is still pending and close our end of the pipe (the process was killed, or is done)."""
        process = self.wire.process
        if process is not None and process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        self.wire.gone = True
        self.wire.fail_pending()
