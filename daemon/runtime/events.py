"""The event log: JSONL, one object per event, append-only, flushed per event, mode 0600; and Signal, how the
service's collaborators hear one another's events (a document closed, a prefetch finished) without calling each other.

Every event goes to the sinks (the file, live metrics, the stats counters) as a
plain dict. No source text goes in unless the user asked for it with --log-text.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Generic, ParamSpec

LOG_VERSION = 1
P = ParamSpec("P")

Sink = Callable[[dict[str, Any]], None]


class LogFile:
    """An append-only JSONL file opened at start-up, so a bad path fails early and clearly."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot open log file {path}: {exc.strerror}") from None
        self._lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        line = (json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            if self._fd >= 0:
                written = os.write(self._fd, line)  # one write per event: a kill loses at most this line
                while written < len(line):  # short writes happen only on a full disk or a signal
                    written += os.write(self._fd, line[written:])

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1


class EventLog:
    def __init__(self) -> None:
        self.sinks: list[Sink] = []

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": round(time.time(), 6), "event": event, "v": LOG_VERSION, **fields}
        for sink in self.sinks:
            try:
                sink(record)
            except Exception:  # a sink must never take a request down with it
                pass
        return record


class Signal(Generic[P]):
    """One kind of event: calling it tells every subscriber, in the order they subscribed."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[P, None]] = []

    def subscribe(self, subscriber: Callable[P, None]) -> None:
        self._subscribers.append(subscriber)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for subscriber in self._subscribers:
            subscriber(*args, **kwargs)
