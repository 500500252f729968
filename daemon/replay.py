"""Headless replay: drive a real `tabd serve` child over LSP with a recorded edit session.

The simulated user types the recorded keystrokes on the recorded clock (scaled by
`speed`). After each change it asks for an inline completion at the cursor; a request
still pending when the next keystroke is due is cancelled ($/cancelRequest). When a
suggestion equals the next characters the recorded person typed (ending on a
keystroke boundary), the user thinks for a moment, accepts it as one edit plus
`tabd.accept`, skips those keystrokes and asks again (an "after-accept" request).
When only its first words match, those words are accepted (a partial accept).
Accepting only exact recorded text keeps the simulated document equal to the
recorded one, so later recorded ranges stay valid.

Latency is measured here, from request sent to response read. Which layer served a
response comes from the server's `tabd/stats` ("last.source"), asked after each answer.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import os
import re
import signal
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from tabd.daemon.session import Session, advance, apply_change, utf16_len

SOURCES = ("cache", "typed", "inflight", "model", "none")
# answers looked up in memory: the cache proper, or type-through of a shown suggestion
# (what the remainder of a partial accept is served by)
MEMORY_SOURCES = ("cache", "typed")
WORD = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


class ReplayError(RuntimeError):
    """The replay cannot go on; the message says why."""


class DaemonDied(ReplayError):
    """The server process exited while the replay was still talking to it."""


@dataclass
class ReplayOptions:
    speed: float = 1.0                 # recorded time / replay time; 0 or inf: no waiting between keystrokes
    think_ms: float = 250.0            # before pressing Tab on a matching suggestion (scaled by speed)
    server_args: list[str] = field(default_factory=list)   # flags for `tabd serve`
    server_command: list[str] | None = None                # replaces `python -m tabd.daemon serve`
    min_accept_chars: int = 2
    request_timeout: float = 60.0      # fast mode: longest wait for one answer
    startup_timeout: float = 180.0
    progress: bool = True
    env: dict[str, str] | None = None
    check_sync: bool = False          # compare the server's document (tabd/document) with ours before closing
    max_seconds: float | None = None  # stop replaying (and report the part replayed) after this long
    wait_ready: bool = True           # start typing once the model is loaded (tabd/stats "model" != "loading")

    @property
    def fast(self) -> bool:
        return self.speed <= 0 or math.isinf(self.speed)

    def scaled(self, seconds: float) -> float:
        return 0.0 if self.fast else max(0.0, seconds / self.speed)

    def think_s(self) -> float:
        # in fast mode the user still reads the suggestion before pressing Tab: that pause
        # is what speculation has to fill, so it is kept (pass think_ms=0 to drop it)
        return self.think_ms / 1000.0 if self.fast else self.scaled(self.think_ms / 1000.0)


# ---------------------------------------------------------------- measurements


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0, "p95": 0, "p99": 0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))], 3)

    return {"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99)}


@dataclass
class Measurements:
    sessions: int = 0
    keystrokes: int = 0
    requests: int = 0
    answered: int = 0
    shown: int = 0
    accepted: int = 0
    partial_accepts: int = 0
    dismissed: int = 0
    cancelled: int = 0
    errors: int = 0
    command_errors: int = 0
    typed_chars: int = 0
    accepted_chars: int = 0
    after_accept_requests: int = 0
    after_accept_from_cache: int = 0
    after_accept_speculated: int = 0   # cache or inflight: the prefetch had it
    unattributed: int = 0
    sync_checked: int = 0
    sync_mismatches: int = 0
    interrupted: bool = False
    truncated: bool = False
    all_ms: list[float] = field(default_factory=list)
    after_accept_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)
    sources: collections.Counter = field(default_factory=collections.Counter)
    after_accept_sources: collections.Counter = field(default_factory=collections.Counter)
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    server_stats: dict[str, Any] | None = None

    @classmethod
    def merged(cls, parts: Sequence["Measurements"]) -> "Measurements":
        """One set of figures from several replays (counts add up, latency samples pool)."""
        out = cls()
        for part in parts:
            for f in dataclasses.fields(cls):
                mine, theirs = getattr(out, f.name), getattr(part, f.name)
                if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
                    setattr(out, f.name, mine + theirs)
                elif isinstance(theirs, collections.Counter):
                    mine.update(theirs)
                elif isinstance(theirs, list):
                    mine.extend(theirs)
            out.error = out.error or part.error
            out.server_stats = part.server_stats
        return out

    def summary(self) -> dict[str, Any]:
        aa = self.after_accept_requests
        total_chars = self.accepted_chars + self.typed_chars
        out: dict[str, Any] = {
            "sessions": self.sessions,
            "requests": self.requests,
            "shown": self.shown,
            "accepted": self.accepted,
            "typed_chars": self.typed_chars,
            "accepted_chars": self.accepted_chars,
            "after_accept": {
                "requests": aa,
                "from_cache": self.after_accept_from_cache,
                "hit_rate": round(self.after_accept_from_cache / aa, 4) if aa else 0.0,
                "from_speculation": self.after_accept_speculated,
                "sources": dict(self.after_accept_sources),
            },
            "latency_ms": {
                "all": percentiles(self.all_ms),
                "after_accept": percentiles(self.after_accept_ms),
                "model": percentiles(self.model_ms),
            },
            "sources": {name: self.sources.get(name, 0) for name in SOURCES},
            "saved_share": round(self.accepted_chars / total_chars, 4) if total_chars else 0.0,
            "partial_accepts": self.partial_accepts,
            "answered": self.answered,
            "cancelled": self.cancelled,
            "dismissed": self.dismissed,
            "errors": self.errors,
            "keystrokes": self.keystrokes,
            "wall_s": round(self.wall_s, 2),
        }
        if self.truncated:
            out["truncated"] = True
        if self.sync_checked:
            out["sync"] = {"checked": self.sync_checked, "mismatches": self.sync_mismatches}
        if self.command_errors:
            out["command_errors"] = self.command_errors
        if self.unattributed:
            out["unattributed"] = self.unattributed
        if self.server_stats is not None:
            out["server"] = self.server_stats
        if self.error:
            out["error"] = self.error
        return out


# ---------------------------------------------------------------- what the user would accept


def typed_ahead(events: Sequence[dict[str, Any]], start: int, uri: str, cursor: dict[str, int],
                limit: int = 2000) -> tuple[str, dict[int, int]]:
    """The text the recorded person types next at `cursor`, and {chars so far: index after that keystroke}.

    It follows consecutive insertions at the moving cursor, stepping over accept and
    dismiss markers, and stops at anything else (a deletion, a jump, another file).
    """
    text = ""
    boundaries: dict[int, int] = {}
    i = start
    while i < len(events) and len(text) < limit:
        e = events[i]
        if e["op"] in ("accept", "dismiss"):
            i += 1
            continue
        rng = e.get("range")
        if e["op"] != "change" or e["uri"] != uri or rng is None or rng["start"] != rng["end"] \
                or rng["start"] != cursor or not e["text"]:
            break
        text += e["text"]
        cursor = advance(cursor, e["text"])
        i += 1
        boundaries[len(text)] = i
    return text, boundaries


def acceptable(suggestion: str, ahead: str, boundaries: dict[int, int], min_chars: int = 2) -> tuple[int, bool]:
    """(characters of `suggestion` to accept, partial?); (0, False) when nothing should be accepted."""
    if len(suggestion) >= min_chars and ahead.startswith(suggestion) and len(suggestion) in boundaries:
        return len(suggestion), False
    best = 0
    for m in WORD.finditer(suggestion):
        end = m.end()
        if end >= len(suggestion) or not ahead.startswith(suggestion[:end]):
            break
        if end in boundaries:
            best = end
    return (best, True) if best >= min_chars else (0, False)


# ---------------------------------------------------------------- the client side


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _retrieve(future: Any) -> None:
    """Mark a (possibly failed) answer as seen: cancelled requests end in errors nobody awaits."""
    if not future.cancelled():
        future.exception()


def _items(result: Any) -> list[lsp.InlineCompletionItem]:
    if result is None:
        return []
    if isinstance(result, lsp.InlineCompletionList):
        return list(result.items)
    if isinstance(result, list):
        return [r for r in result if isinstance(r, lsp.InlineCompletionItem)]
    return []


def _insert_text(item: lsp.InlineCompletionItem) -> str:
    text = item.insert_text
    return text if isinstance(text, str) else getattr(text, "value", "")


@dataclass
class _Pending:
    msg_id: int
    future: Future
    sent: float
    after_accept: bool
    uri: str
    cursor: dict[str, int]
    version: int
    received: float | None = None


@dataclass
class _Doc:
    text: str
    version: int
    language: str


class Replayer:
    """One server child, any number of sessions replayed through it in turn."""

    def __init__(self, options: ReplayOptions, progress: Callable[[int], None] | None = None) -> None:
        self.options = options
        self.m = Measurements()
        self.client = LanguageClient("tabd-replay", "1")
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.pending: _Pending | None = None
        self.docs: dict[str, _Doc] = {}
        self.incremental = True
        self._next_id = 0
        self._progress = progress or (lambda n: None)
        self._exited: asyncio.Future | None = None
        self._deadline = None if options.max_seconds is None else time.monotonic() + options.max_seconds
        self.stats_supported = True

    # ------------------------------------------------------------ process

    def command(self) -> list[str]:
        if self.options.server_command:  # another server (tests); it gets the same flags
            return [*self.options.server_command, *self.options.server_args]
        return [sys.executable, "-m", "tabd.daemon", "serve", *self.options.server_args]

    async def start(self) -> None:
        cmd = self.command()
        env = dict(os.environ, **(self.options.env or {}))
        await self.client.start_io(cmd[0], *cmd[1:], env=env)
        proc = self.client._server
        assert proc is not None and proc.stderr is not None
        asyncio.get_running_loop().create_task(self._drain(proc.stderr))
        self._exited = asyncio.ensure_future(proc.wait())
        caps = lsp.ClientCapabilities(
            text_document=lsp.TextDocumentClientCapabilities(
                synchronization=lsp.TextDocumentSyncClientCapabilities(dynamic_registration=False),
                inline_completion=lsp.InlineCompletionClientCapabilities(dynamic_registration=False),
            ),
            workspace=lsp.WorkspaceClientCapabilities(execute_command=lsp.ExecuteCommandClientCapabilities()),
            general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
        )
        params = lsp.InitializeParams(capabilities=caps, process_id=os.getpid(), root_uri=None,
                                      client_info=lsp.ClientInfo(name="tabd-replay", version="1"))
        result = await self._guard(self.client.initialize_async(params), self.options.startup_timeout, "initialize")
        sync = result.capabilities.text_document_sync
        kind = sync.change if isinstance(sync, lsp.TextDocumentSyncOptions) else sync
        self.incremental = kind != lsp.TextDocumentSyncKind.Full
        self.client.initialized(lsp.InitializedParams())
        if self.options.wait_ready:
            await self._wait_ready()

    async def _wait_ready(self) -> None:
        """Wait until the server's model is loaded, so the first keystroke does not time the loading."""
        deadline = time.monotonic() + self.options.startup_timeout
        while time.monotonic() < deadline:
            try:
                stats = _plain(await self._guard(asyncio.wrap_future(
                    self.client.protocol.send_request("tabd/stats", {})), 30, "tabd/stats"))
            except DaemonDied:
                raise
            except Exception:
                return  # a server without tabd/stats: nothing to wait on
            if isinstance(stats, dict) and stats.get("error"):
                raise ReplayError(f"tabd serve could not load its model: {stats['error']}")
            if not isinstance(stats, dict) or stats.get("model") != "loading":
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the model did not load in {self.options.startup_timeout:.0f} s")

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while True:
            line = await stream.readline()
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    def died(self) -> bool:
        return self._exited is not None and self._exited.done()

    def death_message(self) -> str:
        proc = self.client._server
        code = proc.returncode if proc is not None else None
        tail = "\n".join(list(self.stderr_tail)[-12:])
        return f"tabd serve exited with code {code} during replay" + (f"; its last words:\n{tail}" if tail else "")

    async def _guard(self, awaitable: Any, timeout: float, what: str) -> Any:
        """Await a server answer, but give up when the server dies or takes longer than `timeout`."""
        task = asyncio.ensure_future(awaitable)
        waiters = {task} | ({self._exited} if self._exited is not None else set())
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        if self.died():
            raise DaemonDied(self.death_message())
        raise TimeoutError(f"{what}: no answer from tabd serve in {timeout:.0f} s")

    async def stop(self) -> None:
        proc = self.client._server
        if proc is not None and proc.returncode is None:
            try:
                await self._guard(self.client.shutdown_async(None), 10, "shutdown")
                self.client.exit(None)
                await asyncio.wait_for(proc.wait(), 10)
            except Exception:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        self.client._stop_event.set()
        for task in self.client._async_tasks:
            task.cancel()

    # ------------------------------------------------------------ requests

    def _request_completion(self, uri: str, cursor: dict[str, int], after_accept: bool) -> None:
        doc = self.docs[uri]
        self._next_id += 1
        params = lsp.InlineCompletionParams(
            context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic),
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=cursor["line"], character=cursor["character"]),
        )
        sent = time.perf_counter()
        future = self.client.protocol.send_request(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=self._next_id)
        pending = _Pending(self._next_id, future, sent, after_accept, uri, dict(cursor), doc.version)

        def stamp(_: Future, p: _Pending = pending) -> None:
            p.received = time.perf_counter()

        future.add_done_callback(stamp)
        self.pending = pending
        self.m.requests += 1
        if after_accept:
            self.m.after_accept_requests += 1

    def _cancel_pending(self) -> None:
        p, self.pending = self.pending, None
        if p is None:
            return
        if not p.future.done():
            self.client.cancel_request(lsp.CancelParams(id=p.msg_id))
            self.m.cancelled += 1

    async def _source_of_last(self) -> str | None:
        if not self.stats_supported:
            return None
        try:
            stats = _plain(await self._guard(asyncio.wrap_future(self.client.protocol.send_request("tabd/stats", {})),
                                             30, "tabd/stats"))
        except DaemonDied:
            raise
        except TimeoutError:  # a stalled answer costs this one attribution, not the rest
            return None
        except Exception:
            self.stats_supported = False
            self.m.warnings.append("the server does not answer tabd/stats: sources are not attributed")
            return None
        last = stats.get("last") if isinstance(stats, dict) else None
        return last.get("source") if isinstance(last, dict) else None

    async def _await_pending(self, deadline: float | None) -> list[lsp.InlineCompletionItem] | None:
        """Items of the pending request if it is answered before `deadline` (monotonic), else None (cancelled)."""
        p = self.pending
        if p is None:
            return None
        wrapped = asyncio.wrap_future(p.future)
        wrapped.add_done_callback(_retrieve)
        timeout = self.options.request_timeout if deadline is None else max(0.0, deadline - time.monotonic())
        waiters = {wrapped} | ({self._exited} if self._exited is not None else set())
        if not p.future.done():
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not p.future.done():
            if self.died():
                raise DaemonDied(self.death_message())
            self._cancel_pending()
            return None
        self.pending = None
        try:
            result = p.future.result()
        except Exception as exc:  # RequestCancelled, server error, or the process gone
            if self.died():
                raise DaemonDied(self.death_message()) from None
            self.m.errors += 1
            if len(self.m.warnings) < 20:
                self.m.warnings.append(f"inlineCompletion failed: {exc}")
            return None
        latency = ((p.received or time.perf_counter()) - p.sent) * 1000.0
        items = [it for it in _items(result) if _insert_text(it)]
        source = await self._source_of_last()
        if source is None and not items:
            source = "none"
        self.m.answered += 1
        self.m.all_ms.append(latency)
        if p.after_accept:
            self.m.after_accept_ms.append(latency)
            self.m.after_accept_sources[source or "unknown"] += 1
            if source in MEMORY_SOURCES:
                self.m.after_accept_from_cache += 1
            if source in MEMORY_SOURCES + ("inflight",):
                self.m.after_accept_speculated += 1
        if source in SOURCES:
            self.m.sources[source] += 1
        else:
            self.m.unattributed += 1
        if source == "model":
            self.m.model_ms.append(latency)
        if items:
            self.m.shown += 1
        return items

    # ------------------------------------------------------------ document sync

    def _did_change(self, uri: str, rng: dict[str, Any] | None, text: str) -> None:
        doc = self.docs[uri]
        doc.text = text if rng is None else apply_change(doc.text, rng, text)
        doc.version += 1
        if self.incremental and rng is not None:
            change: Any = lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start=lsp.Position(**rng["start"]), end=lsp.Position(**rng["end"])), text=text)
        else:
            change = lsp.TextDocumentContentChangeWholeDocument(text=doc.text)
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=doc.version),
            content_changes=[change]))

    def _open(self, e: dict[str, Any], language: str) -> None:
        doc = _Doc(e["text"], 0, e.get("language") or language)
        self.docs[e["uri"]] = doc
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=e["uri"], language_id=doc.language, version=0, text=doc.text)))

    async def _check_sync(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None or not self.options.check_sync or self.died():
            return
        try:
            got = _plain(await self._guard(asyncio.wrap_future(
                self.client.protocol.send_request("tabd/document", {"uri": uri})), 30, "tabd/document"))
        except DaemonDied:
            raise
        except Exception as exc:
            self.m.warnings.append(f"tabd/document failed: {exc}")
            return
        self.m.sync_checked += 1
        if not isinstance(got, dict) or got.get("text") != doc.text:
            self.m.sync_mismatches += 1
            self.m.warnings.append(f"the server's copy of {uri} differs from the replayed document")

    def _close(self, uri: str) -> None:
        if self.docs.pop(uri, None) is not None:
            self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri)))

    def _execute(self, command: str, arguments: list[Any]) -> None:
        # editors do not wait for the command before typing on; neither do we
        future = self.client.protocol.send_request(lsp.WORKSPACE_EXECUTE_COMMAND,
                                                   lsp.ExecuteCommandParams(command=command, arguments=arguments))

        def check(f: Future) -> None:
            exc = f.exception()
            if exc is not None and not self.died():
                self.m.command_errors += 1
                if len(self.m.warnings) < 20:
                    self.m.warnings.append(f"{command} failed: {exc}")

        future.add_done_callback(check)

    # ------------------------------------------------------------ the simulated user

    async def replay(self, session: Session) -> None:
        events = session.events
        opts = self.options
        self.m.sessions += 1
        self.m.warnings.extend(session.warnings)
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
                if items:
                    taken = await self._maybe_accept(items[0], events, i, p)
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
                self.m.typed_chars += len(e["text"])
                self._progress(1)
                rng = e.get("range")
                if rng is not None:
                    self._request_completion(uri, advance(rng["start"], e["text"]), after_accept=False)
            last_t = e["t"]
            anchor = max(due, time.monotonic()) if not opts.fast else time.monotonic()
            i += 1
        if self.pending is not None:
            await self._await_pending(None if opts.fast else time.monotonic() + opts.scaled(0.5))
        for uri in list(self.docs):
            await self._check_sync(uri)
            self._close(uri)

    async def _maybe_accept(self, item: lsp.InlineCompletionItem, events: Sequence[dict[str, Any]], i: int,
                            p: _Pending) -> int | None:
        """Accept (part of) `item` when it is what the person types next; the index of the next event, or None."""
        suggestion = _insert_text(item)
        if item.range is not None and (item.range.start != item.range.end or
                                       (item.range.start.line, item.range.start.character) !=
                                       (p.cursor["line"], p.cursor["character"])):
            return None  # a replacing suggestion cannot equal pure typing
        ahead, boundaries = typed_ahead(events, i, p.uri, p.cursor)
        chars, partial = acceptable(suggestion, ahead, boundaries, self.options.min_accept_chars)
        item_id = item.command.arguments[0] if item.command and item.command.arguments else None
        if not chars:
            if item_id is not None and not ahead.startswith(suggestion[:1]):
                self._execute("tabd.dismiss", [item_id])
                self.m.dismissed += 1
            return None
        await asyncio.sleep(self.options.think_s())
        if self.died():
            raise DaemonDied(self.death_message())
        text = suggestion[:chars]
        self._did_change(p.uri, {"start": p.cursor, "end": p.cursor}, text)
        if item_id is not None:
            self._execute("tabd.accept", [item_id, {"chars": chars, "partial": partial}])
        self.m.accepted += 1
        self.m.partial_accepts += int(partial)
        self.m.accepted_chars += len(text)
        nxt = boundaries[chars]
        skipped = sum(1 for e in events[i:nxt] if e["op"] == "change")
        self._progress(skipped)
        self._request_completion(p.uri, advance(p.cursor, text), after_accept=True)
        return nxt

    async def final_stats(self) -> None:
        if self.stats_supported and not self.died():
            try:
                self.m.server_stats = _plain(await self._guard(
                    asyncio.wrap_future(self.client.protocol.send_request("tabd/stats", {})), 30, "tabd/stats"))
            except Exception:
                pass


async def replay_sessions(sessions: Sequence[Session], options: ReplayOptions) -> Measurements:
    """Replay `sessions` in turn through one server child; `m.error` says why it stopped early, if it did."""
    bar = None
    if options.progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(s.changes() for s in sessions), unit="key", desc="replay", file=sys.stderr,
                   dynamic_ncols=True, leave=False)
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    replayer = Replayer(options, progress=bar.update if bar is not None else None)
    started = time.monotonic()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:  # an interrupted replay still reports what it measured
            loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        await replayer.start()
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


# ---------------------------------------------------------------- text report


def format_table(summary: dict[str, Any]) -> str:
    lat = summary["latency_ms"]
    aa = summary["after_accept"]
    rows = [
        ("sessions", summary["sessions"]),
        ("keystrokes typed", summary.get("keystrokes", "")),
        ("requests / answered / cancelled",
         f"{summary['requests']} / {summary.get('answered', '')} / {summary.get('cancelled', '')}"),
        ("shown / accepted (partial)", f"{summary['shown']} / {summary['accepted']} ({summary.get('partial_accepts', 0)})"),
        ("chars typed / accepted", f"{summary['typed_chars']} / {summary['accepted_chars']}"),
        ("typing saved", f"{100 * summary.get('saved_share', 0):.1f}%"),
        ("after-accept requests", aa["requests"]),
        ("  served from cache", f"{aa['from_cache']} ({100 * aa['hit_rate']:.0f}%)"),
        ("sources", "  ".join(f"{k}={v}" for k, v in summary["sources"].items())),
    ]
    lines = [f"{name:34} {value}" for name, value in rows]
    lines.append(f"{'latency (ms)':34} {'p50':>9} {'p95':>9} {'p99':>9}")
    for name in ("all", "after_accept", "model"):
        q = lat[name]
        lines.append(f"{'  ' + name:34} {q['p50']:>9.1f} {q['p95']:>9.1f} {q['p99']:>9.1f}")
    if summary.get("error"):
        lines.append(f"ERROR: {summary['error']}")
    return "\n".join(lines)


def utf16_width(text: str) -> int:  # re-exported for callers that count accepted chars in LSP units
    return utf16_len(text)


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
            cursor = {"line": line, "character": utf16_len(doc.text.split("\n")[line])}
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
                suggestion = _insert_text(items[0]) if items else ""
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
