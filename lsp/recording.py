"""`tabd serve --record`: the session the editor's messages make, written as the replay's session file.

Edits and cursor moves go in as they come, with their times; a document whose exclusion git is still being asked
(admission.py) has its open and its changes held until git answers, then written with their own times, or dropped
with the open's text if it is excluded. A recording that fails (a full disk) stops, and says so once.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Protocol

logger = logging.getLogger(__name__)

Held = tuple[float, str, list[dict[str, Any]]]  # when a document was opened, its text then, its changes since


class Recorder(Protocol):
    """Where a session's events go (daemon/sessions/record.py SessionRecorder)."""

    def record(self, event: dict[str, Any]) -> None: ...


class Recording:
    def __init__(self, started: float, said: Callable[[str], None]) -> None:
        self.recorder: Recorder | None = None  # set by `tabd serve --record`
        self.started = started
        self.said = said  # tells the user (a pop-up)
        self.cursors: dict[str, int] = {}  # uri -> where its last edit (or request) left the cursor
        self.held: dict[str, Held] = {}  # uri -> its open and changes, while git is asked whether it is ignored

    def record(self, op: str, at: float | None = None, **fields: Any) -> None:
        """One event into the session; `at`: when it happened (monotonic), if not now."""
        if self.recorder is None:
            return
        try:
            self.recorder.record({"t": round((time.monotonic() if at is None else at) - self.started, 4), "op": op,
                                  **fields})
        except (OSError, ValueError) as exc:  # a full disk must not stop edits from reaching the document
            self.recorder = None
            logger.error("recording stopped: %s", exc)
            self.said(f"recording stopped: {exc}")

    def changed(self, uri: str, secret: bool, **fields: Any) -> None:
        """One content change: held while git is asked about its document, else recorded unless `secret`."""
        held = self.held.get(uri)
        if held is not None:
            held[2].append({"at": time.monotonic(), "uri": uri, **fields})
        elif not secret:
            self.record("change", uri=uri, **fields)

    def moved_to(self, uri: str, offset: int, position: dict[str, int]) -> None:
        """A request away from where the last edit left the cursor: the editor moved it without an edit (a closer
        stepped over, an arrow key), which a recorded session keeps as a `move` so replay asks where the user did."""
        if self.recorder is not None and self.cursors.get(uri, offset) != offset:
            self.record("move", uri=uri, position=position)
        self.cursors[uri] = offset

    def opened(self, uri: str, language: str, text: str, excluded: bool, held: Held | None) -> None:
        """A document whose exclusion is known: its open (and the changes held meanwhile), or, excluded, only that it
        was there, never its text."""
        if excluded:
            self.record("open", uri=uri, language=language, excluded=True)
            return
        at, opened, changes = held if held is not None else (None, text, [])
        self.record("open", at, uri=uri, language=language, text=opened)
        for change in changes:  # those made while git was asked: a recording keeps every keystroke
            self.record("change", **change)

    def closed(self, uri: str) -> None:
        self.cursors.pop(uri, None)
        self.record("close", uri=uri)
