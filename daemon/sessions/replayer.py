"""Headless replay: drive a real `tabd serve` child over LSP with a recorded edit session.

The simulated user types the recorded keystrokes on the recorded clock (scaled by
`speed`). After each change it asks for an inline completion at the cursor; a request
still pending when the next keystroke is due is cancelled ($/cancelRequest). When a
suggestion equals the next characters the recorded person typed (ending on a
keystroke boundary), the user thinks for a moment, accepts it as one edit plus
`tabd.accept`, skips those keystrokes and asks again (an "after-accept" request).
When only its first words match, those words are accepted (a partial accept).
Accepting only exact recorded text keeps the simulated document equal to the
recorded one, so later recorded ranges stay valid. A recorded `move` (an editor that
overtyped the closer it inserted: no change) is a keystroke too: no didChange, and
the request comes from the new place; a change's "cursor" (an auto-closed pair
leaves it between) is where its request comes from.

With `edits` on and a server that offers `textDocument/copilotInlineEdit`, each
answered completion that is not taken is followed by a next-edit request at the
same cursor, and by another after the person's pause where the recording has
one of at least `edit_pause_s` (waited for real in fast mode too). An edit that
is exactly the person's next edit (edit_user.py) is taken (a jump key when it is
away from the cursor, then the accept key: applied as a didChange, then its
command), the events that made it by hand are skipped, and the next edit is
asked at once where it left the cursor (the after-accept edit request, a chain).
Any other edit is shown and not taken.

Latency is measured here, from request sent to response read: from just before the
request's frame is built and written to the moment its response frame has been read
off the pipe and parsed as JSON (lsp/client.py resolves the request's future there,
and the first callback on it takes the stamp: Driver._request_completion), before the
answer is turned into Suggestion objects. Which layer served a response comes from
the server's `tabd/stats` ("last.source"), asked after each answer.
"""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import re
import signal
import sys
import tempfile
import time
from typing import Any, Sequence

from tabd.daemon.sessions.driver import DaemonDied, Driver, Pending, ReplayError, ReplayOptions
from tabd.daemon.sessions.edit_user import NextEdit, applied, is_jump, marked, next_edit
from tabd.daemon.sessions.format import KEYSTROKES, Session, advance, position_at
from tabd.lsp.client import InlineEdit, Suggestion
from tabd.lsp.positions import offset_at
from tabd.daemon.sessions.measure import Measurements
from tabd.daemon.sessions.serverlog import keystroke_runs, log_in, size_of
from tabd.daemon.telemetry.host import read_ticks

WORD = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


# ---------------------------------------------------------------- what the user would accept


def cursor_after(event: dict[str, Any]) -> dict[str, int]:
    """Where a change leaves the cursor: its "cursor" (an auto-closed pair's middle), else the end of its text."""
    return event.get("cursor") or advance(event["range"]["start"], event["text"])


def typed_by_hand(event: dict[str, Any]) -> int:
    """The characters of a change the person typed: an auto-closed pair's closer, after its cursor, is the
    editor's (the person types it later, over the editor's, or never)."""
    cursor, rng = event.get("cursor"), event.get("range")
    if cursor is None or rng is None:
        return len(event["text"])
    at = _split_at(rng["start"], event["text"], cursor)
    return len(event["text"]) if at is None else at


def _split_at(start: dict[str, int], text: str, cursor: dict[str, int]) -> int | None:
    """The index in `text`, inserted at `start`, that the position `cursor` falls at (None: not inside it)."""
    for j in range(len(text), -1, -1):
        if advance(start, text[:j]) == cursor:
            return j
    return None


def typed_ahead(events: Sequence[dict[str, Any]], start: int, uri: str, cursor: dict[str, int],
                limit: int = 2000, held: str = "") -> tuple[str, dict[int, int]]:
    """The text the recorded person types next at `cursor`, and {chars so far: index after that keystroke}
    where nothing the editor put after the cursor is held back (ahead_with_held has every keystroke)."""
    text, stops = ahead_with_held(events, start, uri, cursor, limit, held)
    return text, {n: i for n, (i, pending) in stops.items() if not pending}


def ahead_with_held(events: Sequence[dict[str, Any]], start: int, uri: str, cursor: dict[str, int],
                    limit: int = 2000, held: str = "") -> tuple[str, dict[int, tuple[int, str]]]:
    """The text the recorded person types next at `cursor`, and {chars so far: (index after that keystroke,
    what the editor holds after the cursor then)}.

    It follows consecutive insertions at the moving cursor, stepping over accept and
    dismiss markers, and stops at anything else (a deletion, a jump, another file).
    What an editor puts after the cursor on the way (the `)` of an auto-closed `(`) is
    held back until the person's cursor passes it (an overtype: a move) or deletes it;
    only where none is held back does the document equal the text typed so far at the
    start cursor, so only there is a boundary: an accept of that text is exact. `held`: what the editor put
    after the cursor before `start` (the closers a replacing suggestion covers).
    """
    text = ""  # `held`: inserted after the cursor by the editor, not passed yet
    stops: dict[int, tuple[int, str]] = {}
    i = start
    while i < len(events) and len(text) < limit:
        e = events[i]
        if e["op"] in ("accept", "dismiss"):
            i += 1
            continue
        if e["op"] not in ("change", "move") or e.get("uri") != uri:
            break
        if e["op"] == "move":
            passed = _split_at(cursor, held, e["position"])
            if not passed:
                break
            text, held, cursor = text + held[:passed], held[passed:], e["position"]
        else:
            rng = e.get("range")
            if rng is None or rng["start"] != cursor:
                break
            if rng["start"] == rng["end"] and e["text"]:
                at = _split_at(cursor, e["text"], cursor_after(e))
                if at is None:
                    break
                text, held, cursor = text + e["text"][:at], e["text"][at:] + held, cursor_after(e)
            else:  # a deletion after the cursor of what the editor put there (Delete)
                deleted = _split_at(cursor, held, rng["end"]) if not e["text"] else None
                if not deleted:
                    break
                held = held[deleted:]
        i += 1
        stops[len(text)] = (i, held)
    return text, stops


def acceptable(suggestion: str, ahead: str, boundaries: dict[int, int], min_chars: int = 2,
               words: bool = True) -> tuple[int, bool]:
    """(characters of `suggestion` to accept, partial?); (0, False) when nothing should be accepted.

    A whole suggestion is taken when it is exactly what the person types next;
    with `words`, otherwise its leading words that match are.
    """
    if len(suggestion) >= min_chars and ahead.startswith(suggestion) and len(suggestion) in boundaries:
        return len(suggestion), False
    if not words:
        return 0, False
    best = 0
    for m in WORD.finditer(suggestion):
        end = m.end()
        if end >= len(suggestion) or not ahead.startswith(suggestion[:end]):
            break
        if end in boundaries:
            best = end
    return (best, True) if best >= min_chars else (0, False)


FAST_TYPING_S = 0.05  # fast mode: how long a person typing on waits for a next edit before the next key


class Replayer(Driver):
    """One server child, any number of sessions replayed through it in turn."""

    # ------------------------------------------------------------ the simulated user

    async def replay(self, session: Session) -> None:
        events = session.events
        opts = self.options
        if self._deadline is None and opts.max_seconds is not None:
            self._deadline = time.monotonic() + opts.max_seconds
        self.m.sessions += 1
        self.m.warnings.extend(session.warnings)
        cursors: dict[str, dict[str, int]] = {}  # uri -> where the last change or move left the cursor
        edits_marked = marked(events)
        i = 0
        last_t = events[0]["t"] if events else 0.0
        anchor = time.monotonic()
        while i < len(events):
            if self._deadline is not None and time.monotonic() > self._deadline:
                self.m.truncated = True
                break
            e = events[i]
            if e["op"] in ("accept", "dismiss"):  # the recorded user's decisions; ours are made here
                i += 1
                continue
            due = anchor + opts.scaled(e["t"] - last_t)
            p = self.pending
            if p is not None:
                items = await self._await_pending(None if opts.fast else due)
                taken = None
                if items:
                    taken = await self._maybe_accept(items[0], events, i, p)
                if taken is None and items is not None and p.ask_edit and self.edits_on and p.uri in self.docs:
                    taken = await self._offer_edits(p, events, i, e["t"] - last_t, due, edits_marked, cursors)
                if taken is not None:
                    i = taken
                    last_t = events[i - 1]["t"]
                    anchor = time.monotonic()
                    continue
            if self.died():
                raise DaemonDied(self.death_message())
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self._cancel_pending()  # the user typed on before the answer came
            op, uri = e["op"], e.get("uri", "")
            if op == "open":
                self._open(e, session.language)
            elif op == "close":
                await self._check_sync(uri)
                self._close(uri)
            elif op == "change" and uri in self.docs:
                self._did_change(uri, e.get("range"), e["text"])
                self.m.keystrokes += 1
                self.m.typed_chars += typed_by_hand(e)
                self._progress(1)
                if e.get("range") is not None:
                    cursors[uri] = cursor_after(e)
                    self._request_completion(uri, cursors[uri], after_accept=False,
                                             after_opener=e["text"][:1] in "([{" and bool(e["text"]))
            elif op == "move" and uri in self.docs:  # an overtype: the editor sends no change, only asks again
                self.m.keystrokes += 1
                self.m.moves += 1
                before = cursors.get(uri)
                if before is not None and e["position"] == dict(before, character=before["character"] + 1):
                    self.m.typed_chars += 1  # the closer typed over: one character typed by hand
                cursors[uri] = e["position"]
                self._progress(1)
                self._request_completion(uri, e["position"], after_accept=False)
            last_t = e["t"]
            anchor = max(due, time.monotonic()) if not opts.fast else time.monotonic()
            i += 1
        if self.pending is not None:
            await self._await_pending(None if opts.fast else time.monotonic() + opts.scaled(0.5))
        for uri in list(self.docs):
            await self._check_sync(uri)
            self._close(uri)

    async def _maybe_accept(self, item: Suggestion, events: Sequence[dict[str, Any]], i: int,
                            p: Pending) -> int | None:
        """Accept (part of) `item` when it is what the person types next; the index of the next event, or None."""
        suggestion = item.text
        covered = self._covered(p, item)
        if covered is None:
            return None  # a suggestion elsewhere, or replacing what the person typed: it cannot equal their typing
        # a suggestion that replaces the editor's closers after the cursor equals typing through them
        ahead, stops = ahead_with_held(events, i, p.uri, p.cursor, held=covered)
        boundaries = {n: index for n, (index, _) in stops.items()}
        chars, partial = acceptable(suggestion, ahead, boundaries, self.options.min_accept_chars,
                                    words=self.options.accept != "tab")
        item_id = item.item_id
        if not chars:
            if item_id is not None and not ahead.startswith(suggestion[:1]):
                self._execute("tabd.dismiss", [item_id])
                self.m.dismissed += 1
            return None
        await asyncio.sleep(self.options.think_s())
        if self.died():
            raise DaemonDied(self.death_message())
        text = suggestion[:chars]
        # Tab, as the editor applies the item (over its range: the editor's closers after the cursor). What the
        # editor would still hold after the cursor at this point of the recorded typing (the `)` of a `(` the
        # suggestion wrote) stays in the document, after the cursor: an editor does not auto-close an accepted
        # suggestion, so the person types that `)` later where the recording steps over it, one key either way,
        # and the document stays the recorded one.
        pending = stops[chars][1]
        end = dict(p.cursor, character=p.cursor["character"] + len(covered)) if covered else p.cursor
        self._did_change(p.uri, {"start": p.cursor, "end": end}, text + pending)
        if item_id is not None:
            self._execute("tabd.accept", [item_id, {"chars": chars, "partial": partial}])
        self.m.accepted += 1
        self.m.partial_accepts += int(partial)
        self.m.accepted_chars += len(text)
        nxt = stops[chars][0]
        skipped = sum(1 for e in events[i:nxt] if e["op"] in KEYSTROKES)
        self.m.keystrokes_skipped += skipped
        self.m.keystrokes_saved += skipped - 1  # the accepting key is a keystroke too
        if not partial:
            self.m.accepted_chars_full += len(text)
        self._progress(skipped)
        self._request_completion(p.uri, advance(p.cursor, text), after_accept=True)
        return nxt

    async def _offer_edits(self, p: Pending, events: Sequence[dict[str, Any]], i: int, gap: float, due: float,
                           edits_marked: bool, cursors: dict[str, dict[str, int]]) -> int | None:
        """The completion at p was answered and not taken: ask the next edit there, as an NES client asks it, and
        once more after the person's pause when the recording pauses there (a rename is proposed elsewhere once the
        user stops typing the name); the index of the next event when an edit was taken, else None."""
        opts = self.options
        # fast mode: a person typing on does not wait for an answer the server holds until their pause (it comes to
        # them only if it is already there); a recorded pause is asked about again below, after waiting it for real
        typing_on = opts.fast and (opts.edit_pause_s <= 0 or gap < opts.edit_pause_s)
        deadline = time.monotonic() + FAST_TYPING_S if typing_on else None if opts.fast else due
        edit = await self._ask_edit(p.uri, p.cursor, False, deadline)
        if edit is not None:
            taken = await self._take_edits(edit, events, i, p.uri, p.cursor, edits_marked, cursors)
            if taken is not None:
                return taken
        if opts.edit_pause_s <= 0 or gap < opts.edit_pause_s:
            return None
        # the pause is waited for real in fast mode too: the server tells a paused user from a typing one by its clock
        pause = opts.edit_pause_s if opts.fast else opts.scaled(opts.edit_pause_s)
        if not opts.fast and time.monotonic() + pause >= due:
            return None
        await asyncio.sleep(pause)
        edit = await self._ask_edit(p.uri, p.cursor, False, None if opts.fast else due)
        return None if edit is None else await self._take_edits(edit, events, i, p.uri, p.cursor, edits_marked, cursors)

    def _edit_is_next(self, edit: InlineEdit, events: Sequence[dict[str, Any]], i: int, uri: str,
                      edits_marked: bool) -> NextEdit | None:
        """The person's next edit when `edit` is exactly it (the same document results), else None."""
        doc = self.docs.get(uri)
        if doc is None or edit.uri not in (None, uri) or edit.version not in (None, 0, doc.version):
            return None
        result = applied(doc.text, edit.range, edit.text)
        if result is None or result == doc.text:
            return None
        nxt = next_edit(events, i, uri, doc.text, edits_marked)
        return nxt if nxt is not None and nxt.text == result else None

    async def _take_edits(self, edit: InlineEdit | None, events: Sequence[dict[str, Any]], i: int, uri: str,
                          cursor: dict[str, int], edits_marked: bool, cursors: dict[str, dict[str, int]]) -> int | None:
        """Take `edit` when it is the person's next edit, then each next edit asked at the cursor it leaves that is the
        one after (a chain, answered from memory when the server speculated it); the index of the next event, or None."""
        taken = None
        while edit is not None:
            nxt = self._edit_is_next(edit, events, i, uri, edits_marked)
            if nxt is None:
                break  # shown, not the next edit: the user types on
            await asyncio.sleep(self.options.think_s())
            if self.died():
                raise DaemonDied(self.death_message())
            jump = is_jump(cursor, edit.range)
            # as a client applies it: the range replaced by the text, the cursor at its end, then the edit's command
            self._did_change(uri, edit.range, edit.text)
            command = edit.command or {}
            if isinstance(command.get("command"), str):
                arguments = command.get("arguments")
                self._execute(command["command"], list(arguments) if isinstance(arguments, list) else [])
            self.m.edits_accepted += 1
            self.m.edit_jumps += int(jump)
            self.m.edit_keys_needed += nxt.keys
            self.m.edit_keys_spent += 1 + int(jump)
            self.m.edit_chars += len(edit.text)
            self._progress(nxt.keys)
            i = taken = nxt.end
            cursor = advance(edit.range["start"], edit.text)
            cursors[uri] = cursor
            edit = await self._ask_edit(uri, cursor, True, None)
        if taken is not None:
            self._request_completion(uri, cursor, after_accept=False, ask_edit=False)  # the edit there is asked
        return taken

    def _covered(self, p: Pending, item: Suggestion) -> str | None:
        """The text after the cursor an item replaces ("" for an insertion at the cursor); None for an item that
        does not start at the cursor or reaches past its line."""
        if item.range is None:
            return ""
        start, end = item.range["start"], item.range["end"]
        if start != p.cursor or end["line"] != start["line"] or end["character"] < start["character"]:
            return None
        if end == start:
            return ""
        text = self.docs[p.uri].text
        return text[offset_at(text, start["line"], start["character"]):offset_at(text, end["line"], end["character"])]


async def replay_sessions(sessions: Sequence[Session], options: ReplayOptions) -> Measurements:
    """Replay `sessions` in turn through one server child; `m.error` says why it stopped early, if it did.

    The prompt reuse of the keystroke requests comes from the child's log: the one its
    flags name, else a temporary one.
    """
    with tempfile.TemporaryDirectory(prefix="tabd-replay-") as tmp:
        log = log_in(options.server_args)
        if log is None:
            log = os.path.join(tmp, "serve.jsonl")
            options = dataclasses.replace(options, server_args=[*options.server_args, "--log", log])
        start = size_of(log)
        m = await _replay_through(sessions, options)
        m.keystroke_runs = keystroke_runs(log, start)
    return m


async def _replay_through(sessions: Sequence[Session], options: ReplayOptions) -> Measurements:
    bar = None
    if options.progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(s.keystrokes() for s in sessions), unit="key", desc="replay", file=sys.stderr,
                   dynamic_ncols=True, leave=False)
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    replayer = Replayer(options, progress=bar.update if bar is not None else None)
    started, ticks = time.monotonic(), read_ticks()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:  # an interrupted replay still reports what it measured
            loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        await replayer.start()
        gc.freeze()  # the sessions read and the server started: nothing here for a full collection to pause on
        for session in sessions:
            if replayer.m.truncated:
                break
            await replayer.replay(session)
        await replayer.final_stats()
    except asyncio.CancelledError:
        task.uncancel()
        replayer.m.interrupted = True
        replayer.m.error = "interrupted"
    except ReplayError as exc:
        replayer.m.error = str(exc)
    except (TimeoutError, OSError) as exc:
        replayer.m.error = f"{exc}" + (f"\n{replayer.death_message()}" if replayer.died() else "")
    finally:
        replayer.m.wall_s = time.monotonic() - started
        now = read_ticks()
        if ticks is not None and now is not None:
            replayer.m.host += now - ticks
        if bar is not None:
            bar.close()
        try:
            await asyncio.wait_for(replayer.stop(), 30)
        except Exception:
            pass
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    return replayer.m


def run_replay(sessions: Sequence[Session], options: ReplayOptions) -> Measurements:
    return asyncio.run(replay_sessions(sessions, options))


# ---------------------------------------------------------------- sessions that accept by construction


async def _echo_events(text: str, uri: str, language: str, anchors: Sequence[tuple[int, str]],
                       options: ReplayOptions, rounds: int, cps: float, pause: float) -> list[dict[str, Any]]:
    replayer = Replayer(dataclasses.replace(options, progress=False, check_sync=False))
    events: list[dict[str, Any]] = [{"t": 0.0, "op": "open", "uri": uri, "language": language, "text": text}]
    t = 0.0
    try:
        await replayer.start()
        replayer._open(events[0], language)
        inserted_lines = 0
        for anchor, indent in anchors:
            doc = replayer.docs[uri]
            line = anchor + inserted_lines
            cursor = position_at(doc.text, offset_at(doc.text, line, sys.maxsize))  # the line's end
            pieces = ["\n" + indent]  # Enter with auto-indent, then whatever the model says, `rounds` times
            t += 1.0
            for _ in range(rounds + 1):
                piece = pieces[-1]
                replayer._did_change(uri, {"start": cursor, "end": cursor}, piece)
                keys = [piece] if piece == pieces[0] and len(pieces) == 1 else list(piece)
                for key in keys:
                    t += 1.0 / cps
                    events.append({"t": round(t, 3), "op": "change", "uri": uri,
                                   "range": {"start": dict(cursor), "end": dict(cursor)}, "text": key})
                    cursor = advance(cursor, key)
                t += pause  # the person reads the ghost text before typing it: the model's time to answer
                inserted_lines += piece.count("\n")
                if len(pieces) > rounds:
                    break
                replayer._request_completion(uri, cursor, after_accept=False)
                items = await replayer._await_pending(None)
                suggestion = items[0].text if items else ""
                if not suggestion:
                    break
                pieces.append(suggestion)
        t += 1.0
        events.append({"t": round(t, 3), "op": "close", "uri": uri})
    finally:
        await asyncio.wait_for(replayer.stop(), 30)
    if replayer.m.error:
        raise RuntimeError(replayer.m.error)
    return events


def echo_session(text: str, uri: str, anchors: Sequence[tuple[int, str]], options: ReplayOptions,
                 rounds: int = 3, cps: float = 8.0, language: str = "python", pause: float = 1.5) -> list[dict[str, Any]]:
    """Events of a person who, at the end of each anchor line, presses Enter and then types exactly
    what the model suggests there, `rounds` suggestions in a row, as asked of a server beforehand.

    Greedy decoding is deterministic, so on replay every one of those suggestions matches and
    is accepted, whatever the model's quality: the session measures the after-accept path even
    when a small model rarely guesses what a real person typed.
    """
    return asyncio.run(_echo_events(text, uri, language, anchors, options, rounds, cps, pause))
