"""The LSP side of replay: a `tabd serve` child over stdio, its requests and answers, and the document kept in step with it."""
from __future__ import annotations

import asyncio
import collections
import math
import os
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from tabd.daemon.sessions.format import apply_change
from tabd.lsp.client import METHOD_NOT_FOUND, Client, InlineEdit, ResponseError, Suggestion, inline_edits, plain, suggestions
from tabd.daemon.sessions.measure import EDIT_MEMORY_SOURCES, MEMORY_SOURCES, SOURCES, Measurements


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
    accept: str = "words"             # "tab": whole suggestions only; "words": also the leading words that match
    edits: bool = False               # also ask textDocument/copilotInlineEdit when the server offers it (edit_user.py)
    edit_pause_s: float = 1.1         # a recorded pause at least this long: the edit is asked again after it (0: never)

    @property
    def fast(self) -> bool:
        return self.speed <= 0 or math.isinf(self.speed)

    def scaled(self, seconds: float) -> float:
        return 0.0 if self.fast else max(0.0, seconds / self.speed)

    def think_s(self) -> float:
        # in fast mode the user still reads the suggestion before pressing Tab: that pause
        # is what speculation has to fill, so it is kept (pass think_ms=0 to drop it)
        return self.think_ms / 1000.0 if self.fast else self.scaled(self.think_ms / 1000.0)


def _retrieve(future: Any) -> None:
    """Mark a (possibly failed) answer as seen: cancelled requests end in errors nobody awaits."""
    if not future.cancelled():
        future.exception()


@dataclass
class Pending:
    msg_id: int
    future: Future
    sent: float
    after_accept: bool
    uri: str
    cursor: dict[str, int]
    version: int
    received: float | None = None
    after_opener: bool = False  # the keystroke typed an opening bracket (`(`, or VS Code's `()`)
    ask_edit: bool = True  # once answered, ask for a next edit there too (when edits are on)


@dataclass
class _Doc:
    text: str
    version: int
    language: str


class Driver:
    """One server child over LSP: the process, inline-completion requests and their figures, document sync."""

    def __init__(self, options: ReplayOptions, progress: Callable[[int], None] | None = None,
                 client_name: str = "tabd-replay") -> None:
        self.options = options
        self.m = Measurements()
        self.client = Client(client_name)  # clientInfo.name: a client that batches its didChange says so by name
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.pending: Pending | None = None
        self.docs: dict[str, _Doc] = {}
        self.incremental = True
        self._next_id = 0
        self._progress = progress or (lambda n: None)
        self._exited: asyncio.Future | None = None
        self._deadline: float | None = None  # max_seconds from the first replayed event: the server's start is not typing
        self.stats_supported = True
        self.last_depth: int | None = None  # the last answer's speculation depth, from tabd/stats
        self.last_origin: str | None = None  # the layer that answered, even with nothing to show (tabd/stats)
        self.edits_on = False  # options.edits, and the server offers copilotInlineEdit

    # ------------------------------------------------------------ process

    def command(self) -> list[str]:
        if self.options.server_command:  # another server (tests); it gets the same flags
            return [*self.options.server_command, *self.options.server_args]
        return [sys.executable, "-m", "tabd.daemon", "serve", *self.options.server_args]

    async def start(self) -> None:
        cmd = self.command()
        env = dict(os.environ, **(self.options.env or {}))
        await self.client.start(cmd, env=env)
        proc = self.client.process
        assert proc is not None and proc.stderr is not None
        asyncio.get_running_loop().create_task(self._drain(proc.stderr))
        self._exited = asyncio.ensure_future(proc.wait())
        self.incremental = await self._guard(self.client.initialize(), self.options.startup_timeout, "initialize")
        self.edits_on = self.options.edits and self.client.offers_inline_edits()
        self.m.edits_offered += int(self.edits_on)
        if self.options.wait_ready:
            await self._wait_ready()

    async def _wait_ready(self) -> None:
        """Wait until the server's model is loaded, so the first keystroke does not time the loading."""
        deadline = time.monotonic() + self.options.startup_timeout
        while time.monotonic() < deadline:
            try:
                stats = plain(await self._guard(asyncio.wrap_future(self.client.request("tabd/stats", {})), 30, "tabd/stats"))
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
        proc = self.client.process
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
        proc = self.client.process
        if proc is not None and proc.returncode is None:
            try:
                await self._guard(self.client.shutdown(), 10, "shutdown")
                await asyncio.wait_for(proc.wait(), 10)
            except Exception:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        self.client.abandon()

    # ------------------------------------------------------------ requests

    def _request_completion(self, uri: str, cursor: dict[str, int], after_accept: bool,
                            after_opener: bool = False, ask_edit: bool = True) -> None:
        doc = self.docs[uri]
        self._next_id += 1
        sent = time.perf_counter()  # before the frame is built and written
        future = self.client.inline_completion(uri, cursor, msg_id=self._next_id)
        pending = Pending(self._next_id, future, sent, after_accept, uri, dict(cursor), doc.version,
                          after_opener=after_opener, ask_edit=ask_edit)

        def stamp(_: Future, p: Pending = pending) -> None:
            # the client resolves the future in the pipe's callback, right after the response frame is read and
            # parsed as JSON: this is "response read" (the answer becomes Suggestion objects after it)
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
            self.client.cancel(p.msg_id)
            self.m.cancelled += 1

    async def _source_of_last(self) -> str | None:
        """The source of the last answer (tabd/stats "last"); its speculation depth is kept in self.last_depth."""
        self.last_depth = None
        self.last_origin = None
        if not self.stats_supported:
            return None
        try:
            stats = plain(await self._guard(asyncio.wrap_future(self.client.request("tabd/stats", {})), 30, "tabd/stats"))
        except DaemonDied:
            raise
        except TimeoutError:  # a stalled answer costs this one attribution, not the rest
            return None
        except ResponseError as exc:
            if exc.code == METHOD_NOT_FOUND:  # a server without tabd/stats: no attribution at all
                self.stats_supported = False
                self.m.warnings.append("the server does not answer tabd/stats: sources are not attributed")
            elif len(self.m.warnings) < 20:  # one failed call costs this one attribution, not the rest
                self.m.warnings.append(f"tabd/stats failed: {exc}")
            return None
        except Exception as exc:  # the connection going, say: this answer is not attributed
            if len(self.m.warnings) < 20:
                self.m.warnings.append(f"tabd/stats failed: {type(exc).__name__}: {exc}")
            return None
        last = stats.get("last") if isinstance(stats, dict) else None
        if isinstance(last, dict) and isinstance(last.get("depth"), int):
            self.last_depth = last["depth"]
        self.last_origin = last.get("origin") if isinstance(last, dict) else None
        return last.get("source") if isinstance(last, dict) else None

    async def _await_pending(self, deadline: float | None) -> list[Suggestion] | None:
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
        items = suggestions(result)
        source = await self._source_of_last()
        if source is None and not items:
            source = "none"
        self.m.answered += 1
        self.m.all_ms.append(latency)
        if p.after_accept:
            # an empty answer reports "none": the layer that said nothing is its origin (a prefetch that found the
            # model has nothing to add after the Tab answers it from memory, as one with text would)
            layer = self.last_origin if source == "none" and self.last_origin in SOURCES else source
            self.m.after_accept_ms.append(latency)
            self.m.after_accept_sources[layer or "unknown"] += 1
            if not items:
                self.m.after_accept_empty += 1
            if layer in MEMORY_SOURCES:
                self.m.after_accept_from_cache += 1
                self.m.after_accept_memory_ms.append(latency)
                if self.last_depth is not None:
                    self.m.after_accept_hits_by_depth[self.last_depth] += 1
            if layer in MEMORY_SOURCES + ("inflight",):
                self.m.after_accept_speculated += 1
        if source in MEMORY_SOURCES and self.last_depth is not None:
            self.m.hits_by_depth[self.last_depth] += 1
        if source in SOURCES:
            self.m.sources[source] += 1
        else:
            self.m.unattributed += 1
        if source == "model":
            self.m.model_ms.append(latency)
        if p.after_opener and (source == "model" or self.last_origin == "model"):  # an empty answer costs the same
            self.m.model_after_opener_ms.append(latency)
        if items:
            self.m.shown += 1
            if source != "typed":  # type-through keeps showing the suggestion typed into: the same one, not a new one
                self.m.distinct_shown += 1
        return items

    async def _ask_edit(self, uri: str, cursor: dict[str, int], after_edit: bool,
                        deadline: float | None) -> InlineEdit | None:
        """Ask textDocument/copilotInlineEdit at the cursor and wait for it until `deadline` (monotonic; None: the
        request timeout); the edit shown (didShowInlineEdit sent, as a client that renders it does), or None."""
        doc = self.docs.get(uri)
        if doc is None:
            return None
        self._next_id += 1
        sent = time.perf_counter()
        future = self.client.inline_edit(uri, doc.version, cursor, msg_id=self._next_id)
        stamp: list[float] = []
        future.add_done_callback(lambda _: stamp.append(time.perf_counter()))  # response read (see _request_completion)
        self.m.edit_requests += 1
        wrapped = asyncio.wrap_future(future)
        wrapped.add_done_callback(_retrieve)
        timeout = self.options.request_timeout if deadline is None else max(0.0, deadline - time.monotonic())
        waiters = {wrapped} | ({self._exited} if self._exited is not None else set())
        if not future.done():
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not future.done():
            if self.died():
                raise DaemonDied(self.death_message())
            self.client.cancel(self._next_id)  # the user typed on
            self.m.edits_cancelled += 1
            return None
        try:
            result = future.result()
        except Exception as exc:
            if self.died():
                raise DaemonDied(self.death_message()) from None
            self.m.edit_errors += 1
            if len(self.m.warnings) < 20:
                self.m.warnings.append(f"copilotInlineEdit failed: {exc}")
            return None
        latency = ((stamp[0] if stamp else time.perf_counter()) - sent) * 1000.0
        edits = inline_edits(result)
        source = await self._edit_source_of_last()
        if source is None and not edits:
            source = "none"
        self.m.edits_answered += 1
        self.m.edit_ms.append(latency)
        self.m.edit_sources[source or "unknown"] += 1
        if after_edit:
            self.m.after_edit_requests += 1
            self.m.after_edit_ms.append(latency)
            self.m.after_edit_sources[source or "unknown"] += 1
            if source in EDIT_MEMORY_SOURCES:
                self.m.after_edit_from_memory += 1
        if not edits:
            return None
        edit = edits[0]
        self.m.edits_shown += 1
        self.m.edit_ids_shown.add(repr(edit.item_id) if edit.item_id is not None else f"#{self.m.edits_shown}")
        if edit.command is not None:
            self.client.did_show_inline_edit(edit.command)
        return edit

    async def _edit_source_of_last(self) -> str | None:
        """Where the last edit answer came from: "cache" when tabd/stats' edits.last.origin says memory, else the
        source that made it ("propagation", "none", ...); a server without edit stats: its last.source."""
        if not self.stats_supported:
            return None
        try:
            stats = plain(await self._guard(asyncio.wrap_future(self.client.request("tabd/stats", {})), 30, "tabd/stats"))
        except DaemonDied:
            raise
        except Exception as exc:  # this answer is not attributed; the next one may be
            if len(self.m.warnings) < 20:
                self.m.warnings.append(f"tabd/stats failed: {type(exc).__name__}: {exc}")
            return None
        if not isinstance(stats, dict):
            return None
        edits = stats.get("edits")
        last = edits.get("last") if isinstance(edits, dict) else stats.get("last")
        if not isinstance(last, dict):
            return None
        if last.get("origin") == "cache":
            return "cache"
        source = last.get("source")
        return source if isinstance(source, str) else None

    # ------------------------------------------------------------ document sync

    def _did_change(self, uri: str, rng: dict[str, Any] | None, text: str) -> None:
        doc = self.docs[uri]
        doc.text = text if rng is None else apply_change(doc.text, rng, text)
        doc.version += 1
        if self.incremental and rng is not None:
            self.client.change(uri, doc.version, rng, text)
        else:
            self.client.change(uri, doc.version, None, doc.text)

    def _open(self, e: dict[str, Any], language: str) -> None:
        doc = _Doc(e["text"], 0, e.get("language") or language)
        self.docs[e["uri"]] = doc
        self.client.open(e["uri"], doc.language, 0, doc.text)

    async def _check_sync(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None or not self.options.check_sync or self.died():
            return
        try:
            got = plain(await self._guard(asyncio.wrap_future(
                self.client.request("tabd/document", {"uri": uri})), 30, "tabd/document"))
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
            self.client.close(uri)

    def _execute(self, command: str, arguments: list[Any]) -> None:
        # editors do not wait for the command before typing on; neither do we
        future = self.client.execute_command(command, arguments)

        def check(f: Future) -> None:
            exc = f.exception()
            if exc is not None and not self.died():
                self.m.command_errors += 1
                if len(self.m.warnings) < 20:
                    self.m.warnings.append(f"{command} failed: {exc}")

        future.add_done_callback(check)

    async def final_stats(self) -> None:
        if self.stats_supported and not self.died():
            try:
                self.m.server_stats = plain(await self._guard(
                    asyncio.wrap_future(self.client.request("tabd/stats", {})), 30, "tabd/stats"))
            except Exception:
                pass
