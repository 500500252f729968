"""`SessionRecorder`: appends the edits a server sees to a session file (`tabd serve --record FILE`).

One JSON line per event, written with a single `os.write` so that a process killed
mid-session leaves at most a torn last line (which the reader skips). The file is
created private (0600): it holds the user's source code.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from tabd.daemon.sessions.format import dumps_event, header


class RecorderError(OSError):
    """The session file cannot be opened for writing; the message says which and why."""


class SessionRecorder:
    def __init__(self, path: str | os.PathLike[str], language: str = "python") -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._start = time.monotonic()
        try:
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise RecorderError(exc.errno, f"cannot record session to {self.path}: {exc.strerror}") from None
        try:
            size = os.fstat(self._fd).st_size
            if size == 0:
                self._write(dumps_event(header(language)))
            elif not self._ends_with_newline(size):
                # a previous recorder died mid-line: end that torn line so ours parse
                self._write("\n")
        except OSError as exc:
            os.close(self._fd)
            self._fd = None
            raise RecorderError(exc.errno, f"cannot record session to {self.path}: {exc.strerror}") from None

    def _ends_with_newline(self, size: int) -> bool:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                return fh.read(1) == b"\n"
        except OSError:
            return True

    def _write(self, line: str) -> None:
        assert self._fd is not None
        data = line.encode("utf-8")
        written = os.write(self._fd, data)
        while written < len(data):  # short writes happen only on full disks or signals
            written += os.write(self._fd, data[written:])

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def record(self, event: dict[str, Any]) -> None:
        """Append one event; `t` defaults to seconds since this recorder started."""
        if "t" not in event:
            event = {"t": round(self.elapsed(), 4), **event}
        line = dumps_event(event)
        with self._lock:
            if self._fd is None:
                raise ValueError(f"session recorder for {self.path} is closed")
            self._write(line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __enter__(self) -> "SessionRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
