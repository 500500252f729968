"""The event log's held lines (EventLog.emit_soon): an accept seen in a Tab's edit is logged at the loop's next turn,
so the inline completion that came in the same read is answered first; the line keeps the time it happened at, and
the log keeps the order: a later event's line never comes before it, and a close writes what is still held."""
from __future__ import annotations

import asyncio

from tabd.daemon.runtime.events import EventLog


def _log() -> tuple[EventLog, list[dict]]:
    events = EventLog()
    lines: list[dict] = []
    events.add_sink(lines.append)
    return events, lines


async def test_a_held_line_is_written_at_the_next_turn_with_its_own_time():
    events, lines = _log()
    record = events.emit_soon("accept", id="1")
    assert lines == []  # nothing written on the way to the answer
    await asyncio.sleep(0)
    assert lines == [record] and lines[0]["ts"] == record["ts"] and lines[0]["event"] == "accept"


async def test_a_later_event_comes_after_the_held_one_and_release_writes_what_is_held():
    events, lines = _log()
    events.emit_soon("accept", id="1")
    events.emit("completion", id="2")  # the answer's own line, in the same turn
    assert [e["event"] for e in lines] == ["accept", "completion"]
    events.emit_soon("accept", id="3")
    events.release()  # the server closes its log files
    assert [e["id"] for e in lines] == ["1", "2", "3"]
    await asyncio.sleep(0)
    assert len(lines) == 3  # written once


def test_without_a_loop_the_line_is_written_now():
    events, lines = _log()
    events.emit_soon("accept", id="1")
    assert [e["id"] for e in lines] == ["1"]
