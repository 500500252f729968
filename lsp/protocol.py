"""pygls' protocol and transport with the gaps closed that would leave an editor waiting or out of sync.

Every request gets an answer:
- a body that is not JSON gets ParseError (-32700), one that is not a JSON-RPC
  request object (a number, an array, a missing or non-string method, a bad id,
  a jsonrpc other than "2.0") gets InvalidRequest (-32600); pygls logs these and
  sends nothing;
- a request whose params do not parse gets InvalidParams (-32602); pygls would
  log it and send nothing;
- a request before `initialize` gets ServerNotInitialized (-32002), a second
  `initialize` and any request after `shutdown` get InvalidRequest (-32600);
  pygls runs the first and drops the others;
- an exception while dispatching gets InternalError (-32603).

The transport is our own (Framer here, serve_stdio/serve_tcp in lsp/transport.py) because pygls'
reader (pygls/io_.py run_async) only knows the exact line
`Content-Length: N\\r\\n`: a header in another case, with a bare \\n or a bad
number makes it read the body as header lines, glue it to the next message's
header and lose every message after it. The Framer finds the next
Content-Length wherever it is, answers what it can recover, skips bodies over
MAX_MESSAGE_BYTES without buffering them, and reads a body whose
Content-Length overstates it once the client stops sending.

didOpen/didChange/didClose go to our DocumentStore (LSP line breaks, clamped
positions) instead of pygls' workspace. Notifications before `initialize` are
dropped, as LSP says, except `exit`.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, TypeGuard

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol, lsp_method

from tabd.daemon.runtime.settings import shown
from tabd.lsp.framing import frame
from tabd.lsp.outbox import Outbox

if TYPE_CHECKING:  # pygls' names for what it reads, for the annotations only
    from pygls.protocol.json_rpc import MsgId, RPCMessage

logger = logging.getLogger(__name__)

MAX_DEPTH = 64  # JSON nesting a message may have: LSP's own are under 10; deeper ones are refused (-32600), since
# decoding and structuring recurse (json raises RecursionError near 1,000 levels, and it took the whole read with it)
MAX_MESSAGE_BYTES = 16 << 20  # a bigger body is skipped (and a request in it answered); documents that big get no completions
MAX_HEADER_LINE = 1 << 20  # bytes without a line break outside a body: junk; keep only its tail while looking for Content-Length
STALL_S = 0.5  # no bytes for this long: try what is buffered as a whole message
CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]{0,63}[ \t]*:[^{]{0,1000}$")
ID_BEFORE_PARAMS = re.compile(rb'^\s*\{[^{]*?"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")')
METHOD = re.compile(rb'"method"\s*:\s*"([^"\\]{1,200})"')
# a header block as clients write it (VS Code, Neovim, pygls, tabd's own): cut in one match (Framer._header_line)
EXACT_HEADER = re.compile(rb"Content-Length: (\d{1,12})\r\n(?:Content-Type: [^\r\n{]{0,1000}\r\n)?\r\n")


# -- framing ------------------------------------------------------------------------------


@dataclass
class Frame:
    """What the Framer cut from the stream: a parsed `message`, an `invalid` body, an `oversize` one, or `junk`."""

    kind: str  # message, invalid, oversize, deep or junk
    value: Any = None  # the JSON value of a message; a `deep` one's id
    head: bytes = b""  # the first bytes of an invalid or oversize body: enough to find its id
    note: str = ""


class Framer:
    """Cuts a byte stream into LSP messages (sans I/O: feed bytes, get frames), recovering from bad framing."""

    def __init__(self, max_body: int = MAX_MESSAGE_BYTES) -> None:
        self.max_body = max_body
        self.buf = bytearray()
        self.length: int | None = None  # body length once a header block ended
        self.header_length: int | None = None  # Content-Length seen in the current header block
        self.discard = 0  # bytes of an oversize body still to drop
        self.discard_total = 0
        self.discard_head = bytearray()

    def pending(self) -> bool:
        return bool(self.buf) or self.length is not None

    def feed(self, data: bytes) -> list[Frame]:
        self.buf += data
        frames: list[Frame] = []
        while self._step(frames):
            pass
        return frames

    def stalled(self) -> list[Frame]:
        """The client stopped sending: a complete JSON object in the buffer is a message, whatever the header said."""
        frames: list[Frame] = []
        if self.discard or not self.buf:
            return frames
        text = bytes(self.buf).rstrip()
        if not text.endswith((b"}", b"]")):
            return frames
        start = text.find(b"{") if self.length is None else 0
        value, end = _decode_prefix(text, max(start, 0))
        if value is None:
            return frames
        note = f"Content-Length said {self.length}, body was {end} bytes" if self.length is not None else "no Content-Length"
        del self.buf[:end]
        self.length = self.header_length = None
        frames.append(checked(value, text, note=note))
        return frames

    def _step(self, frames: list[Frame]) -> bool:
        if self.discard:
            return self._skip(frames)
        if self.length is not None:
            return self._body(frames)
        return self._header_line(frames)

    def _skip(self, frames: list[Frame]) -> bool:
        if not self.buf:
            return False
        n = min(self.discard, len(self.buf))
        if len(self.discard_head) < 4096:
            self.discard_head += self.buf[: 4096 - len(self.discard_head)]
        del self.buf[:n]
        self.discard -= n
        if self.discard == 0:
            frames.append(Frame("oversize", head=bytes(self.discard_head),
                                note=f"{self.discard_total} bytes is over the {self.max_body} byte limit"))
            self.discard_head = bytearray()
        return True

    def _body(self, frames: list[Frame]) -> bool:
        length = self.length
        assert length is not None
        if len(self.buf) < length:
            return False
        body = bytes(self.buf[:length])
        del self.buf[:length]
        self.length = None
        try:
            frames.append(checked(json.loads(body), body))
            return True
        except RecursionError:
            frames.append(Frame("deep", head=body[:4096], note=f"nesting deeper than {MAX_DEPTH} levels"))
            return True
        except Exception as exc:  # ValueError, UnicodeDecodeError, MemoryError: this message only, never the read
            reason = f"{type(exc).__name__}: {exc}"[:200]
        # Content-Length overstated: a whole object, then the next message's header inside this body
        match = CONTENT_LENGTH.search(body)
        if match is not None:
            value, end = _decode_prefix(body, 0)
            if value is not None:
                frames.append(checked(value, body, note=f"Content-Length said {length}, body was {end} bytes"))
                self.buf[:0] = body[match.start():]
                return True
        frames.append(Frame("invalid", head=body[:4096], note=reason))
        return True

    def _header_line(self, frames: list[Frame]) -> bool:
        if self.header_length is None:
            match = EXACT_HEADER.match(self.buf)
            if match is not None:  # a whole header block as clients write it, cut in one match (a Tab's three
                length = int(match.group(1))  # messages come in one read: line by line, their framing cost about
                del self.buf[: match.end()]  # as much as the answer from memory); anything else goes line by line
                self._header_end(length)  # (the match reads the buffer: its group is taken before the cut)
                return True
        nl = self.buf.find(b"\n")
        if nl < 0:
            if len(self.buf) > MAX_HEADER_LINE:
                match = CONTENT_LENGTH.search(self.buf)
                cut = match.start() if match is not None else len(self.buf) - 64
                if cut > 0:
                    frames.append(Frame("junk", head=bytes(self.buf[:256]), note=f"{cut} bytes outside any message"))
                    del self.buf[:cut]
            return False
        line = bytes(self.buf[: nl + 1])
        del self.buf[: nl + 1]
        content = line.rstrip(b"\r\n")
        if not content.strip():
            if self.header_length is None:
                return True  # a blank line outside a header block: nothing to frame
            self._header_end(self.header_length)
            return True
        match = CONTENT_LENGTH.search(content)
        if match is None:
            if HEADER.match(content):
                return True  # another header (Content-Type): nothing we need
            self._junk(frames, content, "not a header")
            return True
        if match.start() > 0:
            self._junk(frames, content[: match.start()], "bytes before a Content-Length header")
        raw = match.group(1).strip()
        if raw.isdigit() and len(raw) <= 12:
            self.header_length = int(raw)
        else:
            self.header_length = None
            frames.append(Frame("junk", head=content[:256], note=f"bad Content-Length {raw[:40]!r}"))
        return True

    def _header_end(self, length: int) -> None:
        """A header block ended, saying `length`: its body is read next, or skipped when over the limit."""
        if length > self.max_body:
            self.discard = self.discard_total = length
        else:
            self.length = length
        self.header_length = None

    def _junk(self, frames: list[Frame], data: bytes, why: str) -> None:
        """Bytes outside a message; a JSON object among them (a body whose header was broken) is still a message."""
        start = data.find(b"{")
        if start >= 0:
            value, end = _decode_prefix(data, start)
            if value is not None:
                frames.append(checked(value, data[start:], note=f"recovered a message without a usable header ({why})"))
                return
        frames.append(Frame("junk", head=data[:256], note=f"{len(data)} bytes skipped: {why}"))


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests objects and arrays more than `limit` levels (no recursion: a loop)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item if type(item) is list else ()
        for child in children:
            if type(child) is dict or type(child) is list:
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def checked(value: Any, body: bytes, note: str = "") -> Frame:
    """A decoded message's frame: `deep` (with the id it carries, if any) when it nests beyond MAX_DEPTH."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH or not deeper_than(value, MAX_DEPTH):  # counts: in C
        return Frame("message", value, note=note)
    msg_id = value.get("id") if type(value) is dict else None
    return Frame("deep", msg_id if _valid_id(msg_id) else None, head=body[:4096],
                 note=f"nesting deeper than {MAX_DEPTH} levels")


def _decode_prefix(data: bytes, start: int) -> tuple[Any, int]:
    """(the JSON object or array at data[start:], where it ends) or (None, 0)."""
    try:
        text = data[start:].decode("utf-8")
        value, end = json.JSONDecoder().raw_decode(text)
    except Exception:  # not JSON, or nested past the decoder's recursion limit
        return None, 0
    if not isinstance(value, (dict, list)):
        return None, 0
    return value, start + len(text[:end].encode("utf-8"))


def id_in(head: bytes) -> Any:
    """The request id in the first bytes of a body that did not parse, if it comes before params."""
    match = ID_BEFORE_PARAMS.search(head)
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


# -- the protocol --------------------------------------------------------------------------

MAX_ERROR_CHARS = 1000  # an error's message (it may quote a URI or a value the client sent: 10 MB of it, once)


def bound_error(data: Any) -> None:
    """Cut an error response's message and data (pygls' traceback) to MAX_ERROR_CHARS, in place."""
    error = data.get("error") if isinstance(data, dict) else getattr(data, "error", None)
    if error is None:
        return
    for name in ("message", "data"):
        text = error.get(name) if isinstance(error, dict) else getattr(error, name, None)
        if isinstance(text, str) and len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS] + "..."
            if isinstance(error, dict):
                error[name] = text
            else:
                try:
                    setattr(error, name, text)
                except Exception:  # a frozen attrs class: left as it is
                    pass



class Unparsable:
    """A request that failed to deserialise; answered with an error instead of dropped."""

    def __init__(self, msg_id: Any, method: str, reason: str) -> None:
        self.id = msg_id
        self.method = method
        self.reason = reason


def _valid_id(value: object) -> TypeGuard[MsgId]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class TabdProtocol(LanguageServerProtocol):
    initialized = False
    exit_code: int | None = None
    on_exit: Callable[[int], None] | None = None  # set by the transport: stop serving with this code
    # set by the server, method -> its one handler, on plain JSON params (lsp/rawparams.py): a request's result, or an
    # awaitable of it (run as a task $/cancelRequest cancels), or a JsonRpcException raised for the client; the
    # methods without one take pygls' structured path
    plain: dict[str, Callable[[Any], Any]] = {}
    lazy: frozenset[str] = frozenset()  # methods whose plain-path answers nobody waits on (lsp/outbox.py)
    now: frozenset[str] = frozenset()  # methods whose plain-path answers go out at once, mid-read too
    notifications: frozenset[str] = frozenset()  # plain methods that are notifications: sent with an id, an error
    # what of a read of several messages goes first (server.tab_read: a Tab's inline completion), given the read's
    # frames; returns those left to handle, in order
    first: Callable[[list[Frame]], list[Frame]] | None = None
    input_fd: int | None = None  # the connection's file descriptors, where it has them (stdio): set by the transport
    output_fd: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outbox = Outbox(self._write)
        # json.dumps(data, default=...) builds an encoder per call; one answer's encoding is on the hot path
        self._encode = json.JSONEncoder(default=self._serialize_message).encode

    # -- writing ------------------------------------------------------------------------------

    def _send_data(self, data: Any, lazy: bool = False) -> None:
        """pygls' framing (Content-Length in bytes), through the outbox: written at once, at the end of the read
        being handled, or (lazy) with the next write."""
        if not data:
            return
        if self.writer is None:
            logger.error("unable to send data: no transport")
            return
        bound_error(data)
        body = self._encode(data).encode("utf-8")
        self.outbox.put(frame(body, f"{self.CONTENT_TYPE}; charset=utf-8") if self._include_headers else body, lazy)

    def _write(self, frame: bytes) -> None:
        writer = self.writer
        if writer is None:  # never: _send_data puts nothing before there is a writer, and pygls never unsets it
            logger.error("unable to send data: no transport")
            return
        try:
            res = writer.write(frame)
            if res is not None and inspect.isawaitable(res):  # an asyncio writer's write returns None
                asyncio.ensure_future(res)
        except BrokenPipeError:
            logger.warning("the client went away while we wrote to it")
            raise
        except Exception as error:
            logger.exception("error sending data")
            self._server._report_server_error(error, JsonRpcInternalError)

    # -- from JSON value to handler ---------------------------------------------------------

    def send_error(self, msg_id: object, code: int, message: str) -> None:
        """An error response; id null where the request's id could not be read (pygls would drop the null)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id if _valid_id(msg_id) else None,
                         "error": {"code": code, "message": message[:MAX_ERROR_CHARS]}})

    def handle_frame(self, frame: Frame) -> None:
        """One frame; whatever it raises stays with it (answered if it was a request), never with the read."""
        try:
            self._handle_frame(frame)
        except (BrokenPipeError, ConnectionError):
            raise
        except Exception as exc:
            logger.exception("error handling a message")
            value = frame.value if frame.kind == "message" else None
            msg_id = value.get("id") if type(value) is dict else None
            if type(value) is dict and _valid_id(msg_id) and "method" in value:
                self.send_error(msg_id, JsonRpcInternalError.CODE, f"internal error: {type(exc).__name__}")

    def _handle_frame(self, frame: Frame) -> None:
        if frame.note:
            logger.warning("transport: %s", frame.note[:300])
        if frame.kind == "message":
            self.handle_value(frame.value)
            return
        if frame.kind == "deep":
            msg_id = frame.value if frame.value is not None else id_in(frame.head)
            method = METHOD.search(frame.head)
            what = f" ({method.group(1).decode('utf-8', 'replace')})" if method else ""
            if msg_id is not None or (method is None and frame.value is None):
                self.send_error(msg_id, JsonRpcInvalidRequest.CODE, f"message{what} refused: {frame.note}")
            return
        msg_id = id_in(frame.head)
        method = METHOD.search(frame.head)
        what = f" ({method.group(1).decode('utf-8', 'replace')})" if method else ""
        if frame.kind == "invalid":
            self.send_error(msg_id, JsonRpcParseError.CODE, f"message{what} is not valid JSON: {frame.note}")
        elif frame.kind == "oversize":
            if msg_id is not None:
                self.send_error(msg_id, JsonRpcInvalidRequest.CODE, f"message{what} skipped: {frame.note}")
            elif method is not None and method.group(1) == types.TEXT_DOCUMENT_DID_OPEN.encode():
                self.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(
                    type=types.MessageType.Warning, message=f"tabd: a document too large to complete was not opened ({frame.note})"))

    def handle_value(self, value: object) -> None:
        """One JSON value from the client: checked as JSON-RPC, structured, dispatched; requests always answered."""
        if not isinstance(value, dict):
            what = "batches are not supported in LSP" if isinstance(value, list) else f"got {type(value).__name__}"
            logger.warning("invalid message: %s", what)
            self.send_error(None, JsonRpcInvalidRequest.CODE, f"a message must be a JSON-RPC object: {what}")
            return
        msg_id = value.get("id")
        has_id = "id" in value
        if "method" not in value:
            if has_id and value.get("jsonrpc") == "2.0" and ("result" in value or "error" in value):
                self.dispatch(value, None)  # a response to one of our requests
            else:
                logger.warning("invalid message without method dropped (keys %s)", shown(list(value)))
            return
        method = value["method"]
        problem = None
        if not isinstance(method, str):
            problem = f"method must be a string, got {type(method).__name__}"
        elif value.get("jsonrpc") != "2.0":
            problem = f'jsonrpc must be "2.0", got {shown(value.get("jsonrpc"))}'
        elif has_id and not _valid_id(msg_id):
            problem = f"id must be an integer or a string, got {type(msg_id).__name__}"
        elif value.get("params") is not None and not isinstance(value["params"], (dict, list)):
            if has_id:
                self.send_error(msg_id, JsonRpcInvalidParams.CODE, f"params of {method} must be an object or an array")
            return
        if problem is not None:
            logger.warning("invalid message: %s", problem)
            if has_id:
                self.send_error(msg_id, JsonRpcInvalidRequest.CODE, problem)
            return
        if "params" not in value:  # optional in JSON-RPC; pygls' generic message types require the field
            value = {**value, "params": None}
        self.dispatch(value, msg_id if has_id else None)

    def dispatch(self, value: dict[str, Any], request_id: MsgId | None) -> None:
        handler = self.plain.get(value["method"])
        if handler is not None and self.initialized and not self._shutdown:
            try:
                result = handler(value["params"])  # on plain JSON: no structuring, and a task only if it must wait
            except JsonRpcException as exc:  # the client's params, told in the handler's words
                if request_id is not None:
                    self._send_data({"jsonrpc": "2.0", "id": request_id, "error": exc.to_response_error()})
                return
            except Exception as exc:  # not run again on the structured path: it may have applied an edit already
                logger.exception("error handling %s", value["method"])
                if request_id is not None:
                    self.send_error(request_id, JsonRpcInternalError.CODE, f"internal error: {type(exc).__name__}: {exc}")
                return
            if request_id is None:
                return
            if value["method"] in self.notifications:  # handled as the notification it is, and still answered
                self.send_error(request_id, JsonRpcInvalidRequest.CODE,
                                f"{value['method'][:200]} is a notification: it takes no id and has no result")
                return
            if type(result) is not dict and inspect.isawaitable(result):  # an answer at once is a dict: no ABC check
                self._answer_later(request_id, result)
                return
            method = value["method"]
            self._send_data({"jsonrpc": "2.0", "id": request_id, "result": result}, lazy=method in self.lazy)
            if method in self.now:
                self.outbox.flush()  # the answer the user waits for goes out now, mid-read or not
            return
        try:
            message = self.structure_message(value)
        except Exception as exc:  # a notification whose params do not parse: nobody to answer
            cause = exc.__cause__ or exc
            logger.warning("notification %s dropped: %s", value.get("method"), f"{type(cause).__name__}: {cause}"[:300])
            return
        notification_with_id = request_id is not None and not isinstance(message, Unparsable) and \
            getattr(message, "id", None) is None
        try:
            self.handle_message(message)
        except Exception as exc:
            logger.exception("error handling %s", value.get("method"))
            if request_id is not None:
                self.send_error(request_id, JsonRpcInternalError.CODE, f"internal error: {type(exc).__name__}: {exc}")
            return
        if notification_with_id:  # handled as the notification it is ($/cancelRequest cancels), and still answered
            self.send_error(request_id, JsonRpcInvalidRequest.CODE,
                            f"{value['method'][:200]} is a notification: it takes no id and has no result")

    def _answer_later(self, request_id: MsgId, result: Awaitable[Any]) -> None:
        """A plain handler's awaitable result: run as a task that $/cancelRequest cancels (pygls' table of requests),
        its result or error written when it is done."""
        task = asyncio.ensure_future(result)
        # pygls types its table concurrent.futures.Future, and files its own asyncio tasks in it as we do here
        self._request_futures[request_id] = task  # type: ignore[assignment]
        task.add_done_callback(partial(self._send_handler_result, msg_id=request_id))

    def structure_message(self, data: dict[str, Any]) -> RPCMessage | Unparsable:
        try:
            message: RPCMessage = super().structure_message(data)
            return message
        except Exception as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                cause = exc.__cause__ or exc
                return Unparsable(data["id"], str(data.get("method")), f"{type(cause).__name__}: {cause}"[:500])
            raise

    def handle_message(self, message: RPCMessage | Unparsable) -> None:
        if isinstance(message, Unparsable):
            logger.warning("invalid params for %s: %s", message.method, message.reason)
            self.send_error(message.id, JsonRpcInvalidParams.CODE, f"invalid params for {message.method}: {message.reason}")
            return
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        is_request = method is not None and msg_id is not None
        if not self.initialized and method not in (types.INITIALIZE, types.EXIT, None):
            if is_request:
                self.send_error(msg_id, JsonRpcServerNotInitialized.CODE, f"{method} before initialize")
            else:
                logger.warning("notification %s before initialize dropped", method)
            return
        if is_request and self._shutdown and method != types.EXIT:
            self.send_error(msg_id, JsonRpcInvalidRequest.CODE, f"{method} after shutdown")
            return
        if method == types.INITIALIZE and is_request:
            if self.initialized:
                self.send_error(msg_id, JsonRpcInvalidRequest.CODE, "initialize was already sent")
                return
            self.initialized = True
        super().handle_message(message)

    # -- lifecycle --------------------------------------------------------------------------

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        """pygls' initialize, plus what tabd tells clients beyond LSP: experimental.tabd.debounceMs, the server's
        debounce floor (0: none), so a client can send at once and leave the waiting to the server; that it serves
        next-edit suggestions; and that it takes tabd/setEnabled.

        Positions are UTF-16 whenever the client offers it, first or not: Copilot's NES clients disagree on the unit
        of copilotInlineEdit (copilot-lsp assumes UTF-16, sidekick.nvim uses the negotiated one, and Neovim offers
        UTF-8 first), so only UTF-16 has every client apply a range in the unit it was sent in."""
        general = params.capabilities.general if params.capabilities is not None else None
        offered = [str(getattr(e, "value", e)) for e in (general.position_encodings or [])] if general is not None else []
        if general is not None and "utf-16" in offered:
            general.position_encodings = ["utf-16"]
        result = yield from super().lsp_initialize(params)
        config = getattr(self._server, "config", None)
        # copilotInlineEdit: next-edit suggestions in GitHub Copilot's shape (lsp/inline_edit.py), which NES clients
        # look for; tabd.inlineEdit says the same to tabd's own clients; tabd.setEnabled: runtime/controls.py
        result.capabilities.experimental = {"copilotInlineEdit": True,
                                            "tabd": {"debounceMs": getattr(config, "debounce_ms", 0), "inlineEdit": True,
                                                     "setEnabled": True}}
        return result

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """Stop serving: exit code 0 after shutdown, 1 without (LSP). The transport closes the rest."""
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        self.request_exit(0 if self._shutdown else 1)

    def request_exit(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code
        try:
            self.outbox.flush()  # an answer still waiting (lazy) is the client's before the end
        except (BrokenPipeError, ConnectionError):
            pass
        if self.on_exit is not None:
            self.on_exit(self.exit_code)

    # -- documents go to our store ----------------------------------------------------------
    # Plain calls, not pygls' generator handlers: pygls files a generator-handled
    # notification's future in _request_futures under a fresh uuid and never
    # removes it, one leaked Future per keystroke (see _handle_notification).

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            handler(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            handler(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            handler(params)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        super()._handle_notification(method_name, params)
        # The other generator-handled notifications (initialized, $/setTrace, ...) leak the same way:
        # a finished future in _request_futures is never needed again (requests pop theirs when answered).
        done = [key for key, future in self._request_futures.items() if future.done()]
        for key in done:
            del self._request_futures[key]
