"""A `tabd serve` child driven over raw Content-Length frames, with timeouts on every read."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tabd.lsp.framing import frame, read_frame  # frame: also the tests' own raw sends


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tabd.daemon", "serve", *extra]


class RawServer:
    """A `tabd serve` child on pipes; send raw bytes or messages, read responses with timeouts."""

    def __init__(self, *extra: str, stderr: Path | None = None, env: dict | None = None, popen=None) -> None:
        self.stderr_path = stderr
        self._stderr = open(stderr, "wb") if stderr else subprocess.DEVNULL
        self.proc = (popen or subprocess.Popen)(
            serve_command(*extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env={**os.environ, **(env or {})},
        )
        self.messages: list[dict] = []
        self.cond = threading.Condition()
        self.eof = False
        self.next_id = 1000
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            body = read_frame(self.proc.stdout)
            if body is None:
                with self.cond:
                    self.eof = True
                    self.cond.notify_all()
                return
            with self.cond:
                self.messages.append(json.loads(body))
                self.cond.notify_all()

    # -- sending ---------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj) -> None:
        self.send_bytes(frame(obj))

    def notify(self, method: str, params=None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params=None, msg_id=None) -> int | str:
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, **({"params": params} if params is not None else {})})
        return msg_id

    # -- receiving -------------------------------------------------------------------------

    def wait_for(self, predicate, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.messages:
                    if predicate(m):
                        self.messages.remove(m)
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise TimeoutError(f"no such message within {timeout} s (eof={self.eof}); have {self.messages[-5:]}")
                self.cond.wait(left)

    def response(self, msg_id, timeout: float = 10.0) -> dict:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def call(self, method: str, params=None, timeout: float = 10.0) -> dict:
        return self.response(self.request(method, params), timeout)

    def result(self, method: str, params=None, timeout: float = 10.0):
        reply = self.call(method, params, timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def notifications(self, method: str) -> list[dict]:
        with self.cond:
            return [m for m in self.messages if m.get("method") == method]

    # -- LSP steps -------------------------------------------------------------------------

    def initialize(self, options=None, encodings=None, process_id=None, timeout: float = 30.0) -> dict:
        caps: dict = {"textDocument": {"inlineCompletion": {}, "synchronization": {}}}
        if encodings:
            caps["general"] = {"positionEncodings": encodings}
        params = {"processId": process_id, "rootUri": None, "capabilities": caps}
        if options is not None:
            params["initializationOptions"] = options
        result = self.result("initialize", params, timeout)
        self.notify("initialized", {})
        return result

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify("textDocument/didOpen",
                    {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})

    def change(self, uri: str, version: int, changes: list[dict]) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes})

    def document(self, uri: str, timeout: float = 10.0) -> dict:
        return self.result("tabd/document", {"uri": uri}, timeout)

    def inline(self, uri: str, line: int, character: int, timeout: float = 60.0) -> dict:
        return self.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}}, timeout)

    def alive(self, timeout: float = 10.0) -> None:
        """The server still answers a well-formed request."""
        assert "result" in self.call("tabd/stats", {}, timeout)

    def shutdown_exit(self, timeout: float = 20.0) -> int:
        self.result("shutdown", None, timeout)
        self.notify("exit")
        return self.wait(timeout)

    def wait(self, timeout: float = 20.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        if self._stderr is not subprocess.DEVNULL:
            self._stderr.close()

