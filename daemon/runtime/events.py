"""The event log: JSONL, one object per event, append-only, flushed per event, mode 0600; and Signal, how the
service's collaborators hear one another's events (a document closed, a prefetch finished) without calling each other.

Every event goes to the sinks (the file, live metrics, the stats counters) as a
plain dict. No source text goes in unless the user asked for it with --log-text.
"""
from __future__ import annotations

import asyncio
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


def _record(event: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"ts": round(time.time(), 6), "event": event, "v": LOG_VERSION, **fields}


class EventLog:
    def __init__(self) -> None:
        self.sinks: list[Sink] = []
        self._held: list[dict[str, Any]] = []  # emit_soon's records, not yet told to the sinks

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        if self._held:  # the log keeps the order the events happened in
            self.release()
        record = _record(event, fields)
        self._tell(record)
        return record

    def emit_soon(self, event: str, **fields: Any) -> dict[str, Any]:
        """emit(), with the sinks told at the loop's next turn (now where there is no loop): for an event seen on the
        way to an answer the same read asks for (the accept in a Tab's edit, before the next inline completion), whose
        line (a JSON encoding and a write) would delay that answer. The record, its time included, is made now, and
        any later event's line comes after it."""
        record = _record(event, fields)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._tell(record)
            return record
        self._held.append(record)
        if len(self._held) == 1:
            loop.call_soon(self.release)
        return record

    def release(self) -> None:
        """Tell the sinks what emit_soon holds (the server calls it before it closes its log files)."""
        held, self._held = self._held, []
        for record in held:
            self._tell(record)

    def _tell(self, record: dict[str, Any]) -> None:
        for sink in self.sinks:
            try:
                sink(record)
            except Exception:  # a sink must never take a request down with it
                pass


class Signal(Generic[P]):
    """One kind of event: calling it tells every subscriber, in the order they subscribed."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[P, None]] = []

    def subscribe(self, subscriber: Callable[P, None]) -> None:
        self._subscribers.append(subscriber)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for subscriber in self._subscribers:
            subscriber(*args, **kwargs)
