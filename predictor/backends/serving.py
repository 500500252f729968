"""The local engine behind an OpenAI-compatible HTTP face: /v1/completions and /v1/models.

Stdlib only (ThreadingHTTPServer). One engine, one request at a time: requests
queue for it by `priority` (vLLM's field: lower sooner, 0 by default; tabd sends
0 for a keystroke, a prefetch's depth, 1 for a warm-up), then in arrival order,
and a running request gives the engine up to a more urgent one that arrives
(it is put back in the queue and resumes from its KV cache). A request whose
client has gone away is dropped, before and during its decode. GET /tabd/stats
says what was served in which order (priorities and arrival numbers, no text). The prompt string is parsed back into (prefix, suffix) with the
engine's FIM template (or taken from the OpenAI `suffix` field), so the engine
runs exactly what the local backend would, KV reuse and token healing included.

A tabd client adds `"tabd": {"multiline": bool, "max_lines": int}` to the
request: the engine then stops by the same rule as the local backend and the
answer is the raw text before clean-up, which the client finishes itself; the
answer's `tabd` field carries each token's probability (`confidence`, in the
finished text's terms), which the client gates by as the local backend does.
Other clients get the engine's block rule (a blank line or a dedent ends it),
cut at their stop strings.
"""
from __future__ import annotations

import heapq
import itertools
import json
import select
import socket
import threading
import time
import uuid
from collections import Counter, deque
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable, Iterator

from tabd.predictor.prompt.prompt_text import parse_fim_prompt, split_context
from tabd.predictor.types import ContextChunk, GenSettings, Interrupted, Prediction, Query

if TYPE_CHECKING:
    from tabd.predictor.backends.local import LocalBackend

Json = dict[str, Any]
# a /v1/completions request read: prefix, suffix, settings, stop strings, tabd's own fields asked, context, priority
Parsed = tuple[str, str, GenSettings, list[str], bool, list[ContextChunk], int]


class RequestError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code

    def body(self) -> Json:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


def raw_text(backend: LocalBackend, prefix: str, suffix: str, max_new_tokens: int) -> str:
    """The text the backend's last predict decoded, before clean-up (what local.py hands to finish)."""
    tokens = list(backend.last_tokens)
    if tokens and tokens[-1] in backend.stop_ids:
        tokens = tokens[:-1]
    heal = backend.layout(prefix, suffix, max_new_tokens).heal
    raw = backend.tokenizer.decode(tokens)
    return raw[len(heal):] if raw.startswith(heal) else ""


def cut_at_stops(text: str, stops: list[str]) -> tuple[str, bool]:
    at = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:at], True) if at >= 0 else (text, False)


class EngineQueue:
    """The engine's one seat: taken lowest priority first, then in arrival order; what it served, for /tabd/stats."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # a heap of (priority, arrival)
        self._busy = False
        self._arrivals = itertools.count()
        self.order: deque[tuple[int, int]] = deque(maxlen=512)  # (priority, arrival) as each took the seat
        self.served: Counter[int] = Counter()  # by priority
        self.preempted = 0  # runs that gave the seat up to a more urgent request
        self.dropped = 0  # requests whose client hung up while they waited

    def arrival(self) -> int:
        return next(self._arrivals)

    @contextmanager
    def seat(self, priority: int, arrival: int, gone: Callable[[], bool]) -> Iterator[None]:
        """Wait for the engine: Interrupted if the client hangs up first."""
        ticket = (priority, arrival)
        with self._cond:
            heapq.heappush(self._waiting, ticket)
            try:
                while self._busy or self._waiting[0] != ticket:
                    if gone():
                        raise Interrupted()
                    self._cond.wait(0.05)
            except BaseException:
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self.dropped += 1
                self._cond.notify_all()
                raise
            heapq.heappop(self._waiting)
            self._busy = True
            self.order.append(ticket)
            self.served[priority] += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def more_urgent_waiting(self, priority: int) -> bool:
        with self._cond:
            return bool(self._waiting) and self._waiting[0][0] < priority

    def stats(self) -> Json:
        with self._cond:
            return {"waiting": len(self._waiting), "busy": self._busy, "order": [list(t) for t in self.order],
                    "served": {str(p): n for p, n in sorted(self.served.items())}, "preempted": self.preempted,
                    "dropped": self.dropped}


class Engine:
    """The backend, its queue, and the served model name."""

    def __init__(self, backend: LocalBackend, name: str) -> None:
        self.backend = backend
        self.name = name
        self.queue = EngineQueue()
        self.created = int(time.time())

    def models(self) -> Json:
        fim = self.backend.template.name
        return {"object": "list", "data": [
            {"id": self.name, "object": "model", "created": self.created, "owned_by": "tabd", "tabd": {"fim": fim}}
        ]}

    def complete(self, parsed: Parsed, req: Json, gone: Callable[[], bool]) -> Json:
        """Run one parsed /v1/completions request; `gone()` says the client hung up."""
        prefix, suffix, settings, stops, tabd, context, priority = parsed
        arrival = self.queue.arrival()
        while True:
            with self.queue.seat(priority, arrival, gone):
                if gone():
                    raise Interrupted()
                try:
                    prediction: Prediction = self.backend.predict(
                        Query(prefix, suffix, settings, str(req.get("user") or "default"), context),
                        lambda: gone() or self.queue.more_urgent_waiting(priority))
                except Interrupted:
                    if gone():
                        raise
                    self.queue.preempted += 1  # back in the queue, at its arrival: it resumes from its KV cache
                    continue
                text = (raw_text(self.backend, prefix, suffix, settings.max_new_tokens) if tabd and not settings.raw
                        else prediction.text)
            break
        text, stopped = cut_at_stops(text, stops)
        ran_out = prediction.decode_tokens >= settings.max_new_tokens and not stopped
        return {
            "text": text,
            "finish_reason": "length" if ran_out else "stop",
            "usage": {
                "prompt_tokens": prediction.prefill_tokens + prediction.reused_tokens,
                "completion_tokens": prediction.decode_tokens,
                "total_tokens": prediction.prefill_tokens + prediction.reused_tokens + prediction.decode_tokens,
            },
            "tabd": {
                "prefill_tokens": prediction.prefill_tokens, "reused_tokens": prediction.reused_tokens,
                "decode_tokens": prediction.decode_tokens, "prefill_ms": round(prediction.prefill_ms, 3),
                "decode_ms": round(prediction.decode_ms, 3), "context_tokens": prediction.context_tokens,
                # each token's (end of the finished suggestion after it, probability): the client gates by it
                "confidence": [[end, p] for end, p in prediction.confidence],
            },
        }

    def parse(self, req: Json) -> Parsed:
        model = req.get("model")
        if model not in (None, "", self.name):
            raise RequestError(404, f"The model `{model}` does not exist; this server serves `{self.name}`.", "model", "model_not_found")
        prompt = req.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise RequestError(400, "prompt must be a string (or a list of one string)", "prompt")
        temperature = req.get("temperature", 0)
        if temperature not in (0, 0.0, None):
            raise RequestError(400, f"only temperature 0 (greedy) is served, got {temperature!r}", "temperature")
        if req.get("n", 1) not in (1, None) or req.get("best_of", 1) not in (1, None):
            raise RequestError(400, "n and best_of must be 1", "n")
        if req.get("echo") or req.get("logprobs"):
            raise RequestError(400, "echo and logprobs are not served", "echo")
        max_tokens = req.get("max_tokens", 16)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 1024:
            raise RequestError(400, f"max_tokens must be an integer between 1 and 1024, got {max_tokens!r}", "max_tokens")
        stops = req.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        if not isinstance(stops, list) or len(stops) > 8 or not all(isinstance(s, str) for s in stops):
            raise RequestError(400, "stop must be a string or a list of at most 8 strings", "stop")
        context: list[ContextChunk] = []
        if req.get("suffix") is not None:
            if not isinstance(req["suffix"], str):
                raise RequestError(400, "suffix must be a string", "suffix")
            prefix, suffix = prompt, req["suffix"]
        else:
            # workspace context at the head goes to the engine as context, so its tokens are laid out as the local backend's
            context, rest = split_context(self.backend.template, prompt)
            parsed = parse_fim_prompt(self.backend.template, rest)
            if parsed is None:
                context, parsed = [], (prompt, "")
            prefix, suffix = parsed
        priority = req.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int) or not -(1 << 31) <= priority < 1 << 31:
            raise RequestError(400, f"priority must be an integer (lower runs sooner), got {priority!r}", "priority")
        tabd = req.get("tabd")
        if isinstance(tabd, dict):
            multiline, max_lines = bool(tabd.get("multiline", False)), tabd.get("max_lines", 8)
            if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= 1000:
                raise RequestError(400, "tabd.max_lines must be an integer between 1 and 1000", "tabd")
            raw = tabd.get("raw", False)
            if not isinstance(raw, bool):
                raise RequestError(400, "tabd.raw must be true or false", "tabd")
            return prefix, suffix, GenSettings(max_tokens, multiline, max_lines, raw=raw), stops, True, context, priority
        return prefix, suffix, GenSettings(max_tokens, True, 1000), stops, False, context, priority


def client_gone(sock: socket.socket) -> bool:
    """True when the peer closed its end: readable, and a peek reads nothing (or fails)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tabd-serve-model"
    engine: Engine  # set on the subclass make_server builds

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes; with Nagle on, the second waits for a delayed ACK (40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request on stderr is noise
        pass

    def _json(self, status: int, body: Json) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._json(200, self.engine.models())
        elif path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/tabd/stats":
            self._json(200, {"model": self.engine.name, "queue": self.engine.queue.stats()})
        else:
            self._json(404, RequestError(404, f"no route GET {path}").body())

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/completions":
            self._json(404, RequestError(404, f"no route POST {path}; this server has /v1/completions").body())
            return
        try:
            req = json.loads(raw or b"{}")
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            self._json(400, RequestError(400, f"request body is not a JSON object: {exc}").body())
            return
        try:
            parsed = self.engine.parse(req)
        except RequestError as exc:
            self._json(exc.status, exc.body())
            return
        stream = bool(req.get("stream"))
        if stream:
            # Headers first: the client sees the request taken, and can hang up (which stops the decode).
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
        try:
            result = self.engine.complete(parsed, req, lambda: client_gone(self.connection))
        except Interrupted:
            self.close_connection = True  # the client hung up; nobody to answer
            return
        except Exception as exc:  # the engine failed: say so, keep serving
            error = RequestError(500, f"{type(exc).__name__}: {exc}")
            if stream:
                self._events([error.body()])
            else:
                self._json(500, error.body())
            return
        ident, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        head = {"id": ident, "object": "text_completion", "created": created, "model": self.engine.name}
        choice = {"text": result["text"], "index": 0, "logprobs": None, "finish_reason": result["finish_reason"]}
        if not stream:
            self._json(200, {**head, "choices": [choice], "usage": result["usage"], "tabd": result["tabd"]})
            return
        # The engine decodes to the end before answering, so the stream is one text chunk, then the end.
        self._events([
            {**head, "choices": [{**choice, "finish_reason": None}]},
            {**head, "choices": [{**choice, "text": ""}], "usage": result["usage"], "tabd": result["tabd"]},
        ])

    def _events(self, events: list[Json]) -> None:
        try:
            for event in events:
                self._chunk(f"data: {json.dumps(event)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except OSError:
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(backend: LocalBackend, host: str = "127.0.0.1", port: int = 0, name: str = "tabd") -> Server:
    """A server bound to host:port (port 0: a free one; see server.server_address)."""
    engine = Engine(backend, name)
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    return Server((host, port), handler)
