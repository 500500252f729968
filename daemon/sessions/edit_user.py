"""Replay's edit user: whether a next-edit suggestion is exactly the edit the recorded person makes next.

A session from `tabd session from-diff` marks where each edit starts (a `move` with "hunk"). The person's next
edit, seen from event i, ends at the first edit end from there: the end of the edit under way, or of the next one
when i is where one starts. Without marks (a recorded session), a document's edits end only where the typing in it
ends. A suggestion is that edit when the document it leaves is the one the recording has at that end: the range
need not be the hunk's, the result must be the same text (replay's own accepts keep the document the recorded one,
so recorded ranges still hold).

Keys: the person pressed one per change and move in between; the simulated user presses one to jump when the edit
starts more than one line from the cursor line (the contract's jump marker), and one to accept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tabd.daemon.sessions.format import KEYSTROKES, apply_change

JUMP_LINES = 1  # an edit starting further than this from the cursor line is jumped to first (one key)


def is_edit_start(event: dict[str, Any]) -> bool:
    return event.get("op") == "move" and "hunk" in event


def marked(events: Sequence[dict[str, Any]]) -> bool:
    """Whether the session marks where each edit starts."""
    return any(is_edit_start(e) for e in events)


@dataclass(frozen=True)
class NextEdit:
    """The person's next edit: the index after its last event, the document then, and the keys it took."""

    end: int
    text: str
    keys: int


def next_edit(events: Sequence[dict[str, Any]], i: int, uri: str, text: str, edits_marked: bool) -> NextEdit | None:
    """The edit the person makes next in `uri` from event i, whose document is `text` there; None when there is none."""
    doc, j, keys = text, i, 0
    while j < len(events):
        e = events[j]
        if e["op"] in ("accept", "dismiss"):
            j += 1
            continue
        if e.get("uri") != uri or e["op"] not in KEYSTROKES:
            break
        if edits_marked and is_edit_start(e) and keys:
            break
        if e["op"] == "change":
            rng = e.get("range")
            doc = e["text"] if rng is None else apply_change(doc, rng, e["text"])
        keys += 1
        j += 1
    return NextEdit(j, doc, keys) if keys and doc != text else None


def applied(text: str, rng: dict[str, Any], new_text: str) -> str | None:
    """`text` with the edit applied; None for a range outside it."""
    try:
        return apply_change(text, rng, new_text)
    except (KeyError, TypeError, ValueError):
        return None


def is_jump(cursor: dict[str, int], rng: dict[str, Any]) -> bool:
    return abs(int(rng["start"]["line"]) - int(cursor["line"])) > JUMP_LINES
