"""The remote backend's wire: one streamed HTTP request on a helper thread (Call), and a server's errors in one line.

remote.py (RemoteBackend) builds the requests, reads the events a Call puts on
its queue and decides what to retry (Retry) and what to tell the user
(RemoteError).
"""
from __future__ import annotations

import json
import queue
import socket
import threading
from typing import Any

import httpx

from tabd.predictor.types import BackendError


class RemoteError(BackendError, RuntimeError):
    """A remote engine that cannot answer; the message is one line naming the URL and the problem."""


def one_line(text: object, limit: int = 240) -> str:
    """str(text) on one line, cut to `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_message(body: str) -> str:
    """The server's own words from an error body (OpenAI, llama.cpp, FastAPI or plain text)."""
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body) or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err
        if err is not None:
            return one_line(err if isinstance(err, str) else json.dumps(err))
    return one_line(body)


class Call:
    """One streamed HTTP request on a helper thread; its events arrive on a queue.

    Events: ("open", None), ("line", str), ("end", None), ("status", (code, body)), ("error", exc).
    cancel() shuts the socket down, which wakes the helper thread and tells the server.
    """

    def __init__(self, client: httpx.Client, url: str, body: dict[str, Any], timeout: httpx.Timeout | None = None) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.aborted = threading.Event()
        self.sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, args=(client, url, body, timeout), daemon=True,
                                        name="tabd-remote")
        self._thread.start()

    def _run(self, client: httpx.Client, url: str, body: dict[str, Any], timeout: httpx.Timeout | None) -> None:
        try:
            if self.aborted.is_set():
                return
            with client.stream("POST", url, json=body,
                               timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT) as response:
                stream = response.extensions.get("network_stream")
                self.sock = stream.get_extra_info("socket") if stream is not None else None
                if self.aborted.is_set():
                    return
                if response.status_code >= 400:
                    response.read()
                    self.events.put(("status", (response.status_code, response.text)))
                    return
                self.events.put(("open", None))
                for line in response.iter_lines():
                    if self.aborted.is_set():
                        return
                    self.events.put(("line", line))
                self.events.put(("end", None))
        except Exception as exc:  # reported to the waiting worker, unless it has gone
            if not self.aborted.is_set():
                self.events.put(("error", exc))

    def cancel(self) -> None:
        self.aborted.set()
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Retry(Exception):
    def __init__(self, error: RemoteError, down: bool = False) -> None:
        self.error, self.down = error, down
