"""A stub OpenAI-compatible model server on 127.0.0.1 whose POST behaviour a test sets (status codes, silence, streams,
a call held open), and which records what it was asked: the remote backend's tests, and the daemon's own tests where a
model call must be seen to start and to be stopped (`tabd serve --backend openai --url ...`)."""
from __future__ import annotations

import json
import math
import select
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

HELD_ANSWER = "return 42"  # what a held call streams when the test releases it instead of the client hanging up


class Scripted(BaseHTTPRequestHandler):
    """Modes: "500", "404", "sleep" (answers after 5 s), "stream" (100 chunks, 0.1 s apart), "infill" (llama-server's
    route), "hold" (headers, then nothing until the client hangs up, `closed`, or the test sets `release`), "answer"
    (streams `answer` at once), "edit" (a next-edit prompt's window rewritten by `edit_for`), "tokens" (streams `tokens`,
one chunk each, with the OpenAI `logprobs` of each when the request asks for them; 400 when `refuse_logprobs`)."""

    protocol_version = "HTTP/1.1"
    mode = "500"
    answer = "total = 0"
    hits: list[str] = []
    bodies: list[dict] = []
    raw: list[bytes] = []  # every POST as it arrived: path, headers and body bytes
    started: threading.Event  # a POST arrived: the model call began
    closed: threading.Event  # the client hung up on a call still being answered
    release: threading.Event  # "hold": answer now
    models: list[dict] = []  # what GET /v1/models lists (404 when empty)
    props: dict = {}  # what GET /props answers (404 when empty): llama-server's, with default_generation_settings
    vocab: dict[str, int] = {}  # POST /tokenize (vLLM's): a text found here is that one token, else 404
    tokens: list[tuple] = []  # "tokens": (text, probability[, the token as the engine spells it]) per chunk
    refuse_logprobs = False  # "tokens": a request with `logprobs` is a 400, as from an engine without them
    text_lag = False  # "tokens": each chunk's text one chunk late (vLLM, while the text could start a stop string)
    prompt_offset = False  # "tokens": text offsets count the prompt too (llama-cpp-python's)
    token_gap = 0.0  # "tokens": seconds between chunks (a decode step's time)
    edit_for = staticmethod(lambda window: window)  # "edit": the updated window for the window a next-edit prompt shows

    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _event_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

    def _data(self, event: dict | str) -> None:
        self.wfile.write(f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def do_GET(self) -> None:
        self.raw.append(self.path.encode() + b"\n" + bytes(self.headers))
        if self.path == "/v1/models" and self.models:
            self._send(200, {"object": "list", "data": self.models})
            return
        if self.path == "/props" and self.props:
            self._send(200, self.props)
            return
        self._send(404, {"error": "not here"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.raw.append(self.path.encode() + b"\n" + bytes(self.headers) + raw)
        body = json.loads(raw or b"{}")
        if self.path == "/tokenize":
            token = self.vocab.get(body.get("prompt"))
            if token is None:
                self._send(404, {"detail": "Not Found"})
            else:
                self._send(200, {"tokens": [token]})
            return
        self.hits.append(self.path)
        self.bodies.append(body)
        self.started.set()
        mode = self.mode
        if mode == "500":
            self._send(500, {"error": {"message": "CUDA out of memory", "type": "server_error"}})
        elif mode == "404":
            self._send(404, {"detail": "Not Found"})
        elif mode == "sleep":
            time.sleep(5)
            self._send(200, {"choices": [{"text": "late"}]})
        elif mode == "stream":
            self._event_stream()
            try:
                for i in range(100):
                    self._data({"choices": [{"text": "a", "index": 0}]})
                    time.sleep(0.1)
            except OSError:
                type(self).closed.set()
        elif mode == "hold":
            self._event_stream()
            if self._client_hung_up():
                type(self).closed.set()
                return
            self._data({"choices": [{"text": HELD_ANSWER, "index": 0}]})
            self._data("[DONE]")
        elif mode == "answer":
            self._event_stream()
            self._data({"choices": [{"text": self.answer, "index": 0}]})
            self._data("[DONE]")
        elif mode == "edit":  # a next-edit prompt gets edit_for(the window) back, any other prompt nothing
            prompt = body.get("prompt", "")
            head, sep, rest = prompt.partition("<<< window: ")
            window = rest.partition("\n")[2].partition("<<< updated\n")[0] if sep else None
            self._event_stream()
            self._data({"choices": [{"text": type(self).edit_for(window) if window is not None else "", "index": 0}]})
            self._data("[DONE]")
        elif mode == "tokens":
            if self.refuse_logprobs and "logprobs" in body:
                self._send(400, {"error": {"message": "logprobs is not supported", "type": "invalid_request_error"}})
                return
            self._event_stream()
            offset, held = self.prompt_offset * len(body.get("prompt", "")), ""
            try:
                for text, p, *shown_as in self.tokens:  # a third item: how the engine spells the token, if not as text
                    lp = ({"tokens": [shown_as[0] if shown_as else text], "token_logprobs": [math.log(p)],
                           "text_offset": [offset],
                           "top_logprobs": None} if "logprobs" in body else None)
                    offset += len(text)
                    held += text  # `text_lag`: a token's text comes a chunk late, as vLLM holds back a possible stop
                    shown, held = (held[:-len(text)], held[-len(text):]) if self.text_lag and text else (held, "")
                    self._data({"choices": [{"text": shown, "index": 0, "logprobs": lp, "finish_reason": None}]})
                    time.sleep(self.token_gap)
                self._data({"choices": [{"text": held, "index": 0, "finish_reason": "stop"}]})
                self._data("[DONE]")
            except OSError:
                type(self).closed.set()
        elif mode == "infill":
            self._event_stream()
            ok = body.get("input_prefix") == "x = " and body.get("input_suffix") == "\n" and body.get("cache_prompt")
            for piece in (["4", "2", "\n", "y"] if ok else ["wrong"]):
                self._data({"content": piece, "stop": False})
            self._data({"content": "", "stop": True, "timings": {"prompt_n": 3, "cache_n": 1, "predicted_n": 4}})

    def _client_hung_up(self) -> bool:
        """Wait for the client to close the connection (True) or for the test's release (False). An SSE comment
        every half second keeps the stream alive, as a slow model's would be: a client's read timeout never fires."""
        conn = self.connection
        while not type(self).release.wait(0.5):
            try:
                readable, _, _ = select.select([conn], [], [], 0)
                if readable and conn.recv(1, socket.MSG_PEEK) == b"":
                    return True
                self.wfile.write(b": holding\n\n")
                self.wfile.flush()
            except OSError:
                return True
        return False


@contextmanager
def stub_model(mode: str = "500") -> Iterator[tuple[type[Scripted], str]]:
    """(the handler class, whose attributes the test reads and sets; the server's URL), served until the block ends."""
    handler = type("H", (Scripted,), {"mode": mode, "hits": [], "bodies": [], "raw": [], "started": threading.Event(),
                                      "closed": threading.Event(), "release": threading.Event(),
                                      "models": [], "props": {}, "vocab": {}, "tokens": [],
                                      "refuse_logprobs": False, "text_lag": False,
                                      "prompt_offset": False, "token_gap": 0.0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()
