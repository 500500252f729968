"""Edit-session files: the JSONL format that `--record`, `tabd session` and `tabd replay` share.

A session is a header line `{"tabd_session": 1, "language": "python"}` followed by one
event per line, in time order:

    {"t": 0.0, "op": "open", "uri": ..., "language": ..., "text": ...}
    {"t": 0.1, "op": "change", "uri": ..., "range": {start, end}, "text": ..., "cursor": {line, character}}
    {"t": 0.3, "op": "move", "uri": ..., "position": {line, character}}
    {"t": 2.0, "op": "accept", "uri": ..., "id": ..., "chars": n, "partial": false}
    {"t": 2.5, "op": "dismiss", "uri": ..., "id": ...}
    {"t": 9.0, "op": "close", "uri": ...}

An excluded document (content exclusion, README) is recorded as an open with `"excluded": true` and no text,
and nothing else of it: the reader leaves it out, with one note, and skips what refers to it.

A change's "cursor" (optional) is where the editor leaves the cursor when that is not
the end of the inserted text: an auto-closed pair `()` leaves it between. A "move" is the
cursor moving with no change to the text: an editor that overtypes the `)` it inserted
sends the server nothing, and the next request comes from the new place. A move that
carries `"hunk": n` starts the n-th edit of a `tabd session from-diff` file (replay's
edit user reads where each edit ends from it). Readers that predate them skip a move
with a warning and ignore "cursor".

Positions are LSP positions in UTF-16 code units. Sessions are written by processes
that may die mid-line, so the reader drops a torn last line with a warning; anything
else that is wrong is a `SessionError` naming the line, or an event skipped with a
warning, never a traceback.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tabd.lsp import positions

FORMAT_VERSION = 1
OPS = ("open", "change", "move", "close", "accept", "dismiss")
KEYSTROKES = ("change", "move")  # what the person pressed a key for


class SessionError(ValueError):
    """A session file that cannot be read; the message names the file and line."""


@dataclass
class Session:
    path: str
    language: str
    events: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return float(self.events[-1]["t"]) if self.events else 0.0

    def changes(self) -> int:
        return sum(1 for e in self.events if e["op"] == "change")

    def keystrokes(self) -> int:
        """Changes and cursor moves (an overtyped closer): the keys the person pressed."""
        return sum(1 for e in self.events if e["op"] in KEYSTROKES)


# ---------------------------------------------------------------- positions (LSP dicts over lsp/positions.py)


def utf16_len(text: str) -> int:
    return positions.units(text, "utf-16")


def offset_at(text: str, position: dict[str, int]) -> int:
    """The string index of an LSP position; raises ValueError when it is outside `text`."""
    return positions.offset_at(text, int(position["line"]), int(position["character"]), strict=True)


def position_at(text: str, offset: int) -> dict[str, int]:
    line, character = positions.position_at(text, offset)
    return {"line": line, "character": character}


def advance(position: dict[str, int], inserted: str) -> dict[str, int]:
    """The position just after `inserted` when it is inserted at `position`."""
    line, character = positions.advance(position["line"], position["character"], inserted)
    return {"line": line, "character": character}


def apply_change(text: str, rng: dict[str, Any], new_text: str) -> str:
    """`text` with the LSP range replaced; raises ValueError for a range outside it."""
    start = offset_at(text, rng["start"])
    end = offset_at(text, rng["end"])
    if end < start:
        raise ValueError("range end is before its start")
    return text[:start] + new_text + text[end:]


def make_range(start: dict[str, int], end: dict[str, int] | None = None) -> dict[str, Any]:
    return {"start": dict(start), "end": dict(end if end is not None else start)}


# ---------------------------------------------------------------- reading


def _header_error(path: str, detail: str) -> SessionError:
    return SessionError(f"{path}:1: {detail}")


def _check_header(path: str, header: Any) -> str:
    if not isinstance(header, dict) or "tabd_session" not in header:
        raise _header_error(path, 'missing header {"tabd_session": 1, "language": ...}: not a tabd session file')
    version = header["tabd_session"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _header_error(path, f"bad session format version {version!r}")
    if version > FORMAT_VERSION:
        raise _header_error(
            path, f"session format version {version} is newer than this tabd reads ({FORMAT_VERSION}); upgrade tabd"
        )
    return str(header.get("language") or "plaintext")


def _inside(text: str, position: Any) -> bool:
    """Whether `position` is an LSP position within `text` (not past a line's end, not inside a surrogate pair)."""
    try:
        offset_at(text, position)
    except (KeyError, TypeError, ValueError):
        return False
    return True


def _event_problem(event: Any, docs: dict[str, str]) -> str | None:
    """Why the event cannot be used (None when it can); updates `docs` when it can."""
    if not isinstance(event, dict):
        return "not a JSON object"
    op = event.get("op")
    if op not in OPS:
        return f"unknown op {op!r}"
    t = event.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or t < 0:
        return f"bad time t={t!r}"
    uri = event.get("uri")
    if op in ("accept", "dismiss"):  # markers: the edit itself is a change event; uri is optional
        return None if uri is None or isinstance(uri, str) else "bad uri"
    if not isinstance(uri, str):
        return "no uri"
    if op == "open":
        if not isinstance(event.get("text"), str):
            return "open without text"
        docs[uri] = event["text"]
    elif op == "change":
        if uri not in docs:
            return f"change to {uri}, which is not open"
        if not isinstance(event.get("text"), str):
            return "change without text"
        rng = event.get("range")
        if rng is None:  # a full-document change is legal LSP
            docs[uri] = event["text"]
            return None
        try:
            docs[uri] = apply_change(docs[uri], rng, event["text"])
        except (KeyError, TypeError, ValueError) as exc:
            return f"range outside the document ({exc})"
    elif op == "move":
        if uri not in docs:
            return f"move in {uri}, which is not open"
        if not _inside(docs[uri], event.get("position")):
            return f"position outside the document ({event.get('position')!r})"
    elif op == "close":
        if docs.pop(uri, None) is None:
            return f"close of {uri}, which is not open"
    return None


def _left_out(event: Any, excluded: set[str], docs: dict[str, str]) -> bool:
    """Whether the event is an excluded document's open, or refers to one; updates `excluded`."""
    if not isinstance(event, dict) or not isinstance(event.get("uri"), str):
        return False
    uri = event["uri"]
    if event.get("op") == "open":
        if event.get("excluded") is True:
            excluded.add(uri)
            docs.pop(uri, None)
            return True
        excluded.discard(uri)
        return False
    if uri in excluded and event.get("op") == "close":
        excluded.discard(uri)
        return True
    return uri in excluded


def parse_session(lines: Iterable[str], path: str = "<session>") -> Session:
    raw = list(lines)
    if not raw or all(not line.strip() for line in raw):
        raise SessionError(f"{path}: empty session file (no header)")
    warnings: list[str] = []
    last_index = max(i for i, line in enumerate(raw) if line.strip())
    try:
        header = json.loads(raw[0])
    except json.JSONDecodeError:
        raise _header_error(path, 'missing header {"tabd_session": 1, "language": ...}: first line is not JSON') from None
    language = _check_header(path, header)
    events: list[dict[str, Any]] = []
    docs: dict[str, str] = {}
    excluded: set[str] = set()  # documents recorded without their text: left out of the session
    last_t = 0.0
    for index in range(1, last_index + 1):
        line = raw[index]
        lineno = index + 1
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            if index == last_index:
                warnings.append(f"{path}:{lineno}: torn last line ignored ({len(line)} bytes, {exc.msg})")
                break
            raise SessionError(f"{path}:{lineno}: not a JSON line ({exc.msg} at column {exc.colno})") from None
        if _left_out(event, excluded, docs):
            if event.get("op") == "open":
                warnings.append(f"{path}:{lineno}: {event['uri']} was excluded when recorded (no text): left out")
            continue
        problem = _event_problem(event, docs)
        if problem:
            warnings.append(f"{path}:{lineno}: {event.get('op', '?') if isinstance(event, dict) else '?'} event skipped: {problem}")
            continue
        if event["op"] == "change" and "cursor" in event and not _inside(docs[event["uri"]], event["cursor"]):
            # the change stands; replay asks at the end of its text, as it does for a change without one
            warnings.append(f"{path}:{lineno}: cursor {event.pop('cursor')!r} ignored: outside the document")
        if event["t"] < last_t:  # clocks go backwards only in hand-edited files; keep order, clamp time
            warnings.append(f"{path}:{lineno}: time {event['t']} goes backwards; clamped to {last_t}")
            event["t"] = last_t
        last_t = float(event["t"])
        events.append(event)
    return Session(path=path, language=language, events=events, warnings=warnings)


def read_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file; SessionError (with the line) when it is unusable, warnings otherwise."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SessionError(f"{p}: cannot read session file: {exc.strerror or exc}") from None
    text = data.decode("utf-8", errors="replace")
    return parse_session(text.splitlines(keepends=True), str(p))


# ---------------------------------------------------------------- writing


def header(language: str = "python") -> dict[str, Any]:
    return {"tabd_session": FORMAT_VERSION, "language": language}


def dumps_event(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_session(path: str | os.PathLike[str], events: Iterable[dict[str, Any]], language: str = "python") -> int:
    """Write a whole session file (replacing it); returns the number of events written."""
    count = 0
    tmp = Path(f"{path}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(dumps_event(header(language)))
        for event in events:
            fh.write(dumps_event(event))
            count += 1
    os.replace(tmp, path)
    return count
