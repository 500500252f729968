"""The completion service: how a keystroke travels from a document state to a suggestion.

cache -> type-through -> in-flight -> model worker; then the speculation
planner enqueues the states after accept as background prefetches. It speaks
plain dataclasses (DocState in, Answer out): the LSP layer converts, the
predictor computes, the cache remembers. Its halves: computations.py (the
model work), speculation.py (prefetch and accepts), stats.py (the report).
"""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Callable

from tabd.daemon.context.store import EMPTY, Snapshot
from tabd.cache.inflight import InflightTable
from tabd.cache.key import short_key, state_key
from tabd.cache.state import DocState, Window
from tabd.cache.store import CompletionCache
from tabd.cache.typed import Shown, TypeThroughIndex, typed_length
from tabd.daemon.runtime.computations import Computation, ModelWork
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.debounce import Debounce, Waits
from tabd.daemon.runtime.speculation import Speculation
from tabd.daemon.runtime.stats import Reporting, Stats
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.scheduler import FOREGROUND, Cancelled, Scheduler
from tabd.daemon.runtime.workspace import Warmer, Workspace, context_options, reuse_of
from tabd.predictor.postprocess import gate, wants_multiline
from tabd.predictor.types import Backend, GenSettings, Prediction

logger = logging.getLogger(__name__)

# After an answer from memory, background jobs wait this long: the client wakes and reads its answer in 0.1-0.5 ms,
# and on 2 busy cores a prefetch that took the free core then delayed that read by up to 1-2 ms (measured at the
# replay client). The prefetch loses 2 ms of the user's think time (hundreds of ms).
HUSH_S = 0.002


@dataclass
class Answer:
    id: str
    text: str
    source: str
    depth: int = 0
    key: str = ""
    latency_ms: float = 0.0


@dataclass(frozen=True)
class Request:
    """One completion request, built once in complete() and carried to its answer."""

    id: str
    doc: str
    version: int
    state: DocState
    window: Window
    key: str  # "" when no model could be loaded: there is no key to look up
    t0: float  # monotonic start, for the request's latency
    after_accept: bool  # the state is one an accept of a shown suggestion reaches
    min_confidence: float = 0.0  # gating for this request: 0 for an invoked one (the best guess anyway)
    context: Snapshot = EMPTY  # the workspace context before the prompt
    min_chars: int = 1  # shorter suggestions are not shown: 1 (all) for an invoked request


@dataclass(frozen=True)
class Outcome:
    """What a request ended with: the text and where it came from, with the model's figures when it ran."""

    text: str
    source: str
    depth: int = 0
    prediction: Prediction | None = None
    queue_ms: float = 0.0
    cache_ms: float = 0.0
    from_key: str = ""  # for a typed answer: the key of the suggestion typed into
    hidden: bool = False  # the layer had a suggestion, and confidence gating showed none of it
    error: str | None = None
    debounce_ms: float = 0.0  # the wait before the model (0 for an answer from memory before any wait)
    debounce_why: str = ""


def settle_heap() -> None:
    """What is loaded now lives as long as the daemon: out of the collector's sight (gc.freeze), so that a full
    collection never pauses an answer (one walks every tracked object: 66 ms once torch is imported, measured). No
    gc.collect() first: after torch's import it freed 49 objects, and it would hold the GIL for those 66 ms."""
    global freezes
    gc.freeze()
    freezes += 1  # counted, not gc.get_freeze_count(): that walks the frozen objects (25 ms once torch is in)


freezes = 0  # settle_heap calls (tabd/stats)


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class CompletionService(ModelWork, Speculation, Reporting):
    def __init__(self, config: Config, backend_factory: Callable[[Config], Backend], events: EventLog | None = None) -> None:
        self.config = config
        self.events = events or EventLog()
        self.cache = CompletionCache(config.cache_entries, config.cache_bytes)
        self.typed = TypeThroughIndex()
        self.inflight: InflightTable[Computation] = InflightTable()
        self.scheduler = Scheduler(workers=self._workers(config))
        self.stats = Stats()
        self.backend: Backend | None = None
        self.load_error: str | None = None
        self._ids = itertools.count(1)
        self._pending_after: list[Callable[[], None]] = []
        self.debounce = Debounce(config.debounce_ms)
        self.waits = Waits()
        self._init_speculation()
        self._foreground: dict[str, Computation] = {}  # doc -> its latest request's computation
        self._last_shown: dict[str, tuple[Window, str]] = {}  # doc -> (window, text) of its latest suggestion
        self.workspace = Workspace(context_options(config), config.prefix_chars, config.suffix_chars, self._context_changed)
        self.warmer = Warmer(self.scheduler, self.events, self.workspace, self._count_reuse)
        self.handover = None  # set by a torch-free start (handover.py)
        self._loaded = self.scheduler.submit(lambda stop: self._load(backend_factory), -1, "load")
        self.model_id = "loading"

    # -- model ----------------------------------------------------------------

    def _load(self, factory: Callable[[Config], Backend]) -> None:
        try:
            self.backend = factory(self.config)
            self.model_id = self.backend.model_id
        except Exception as exc:  # reported to the user, not raised into a request
            self.load_error = str(exc)
            self.model_id = "unavailable"
            self.events.emit("error", where="load", message=self.load_error)
            return
        if getattr(self.backend, "can_hand_over", lambda: False)():  # a torch-free start: the fast engine follows
            from tabd.daemon.runtime.handover import HandOver

            self.handover = HandOver(self.backend, self.scheduler, self.events)
        settle_heap()

    async def ready(self) -> bool:
        if not self._loaded.future.done():
            # shielded: a request cancelled while the model loads must not cancel the loading
            await asyncio.shield(asyncio.wrap_future(self._loaded.future))
        # once loaded, no await: wrapping a done future still costs a self-pipe wake-up and a loop turn per request
        return self.backend is not None

    def settings_for(self, state: DocState) -> GenSettings:
        line_before, line_after = state.current_line()
        lines = state.before.rsplit("\n", 2)
        previous = lines[-2] if len(lines) >= 2 else ""
        return GenSettings(self.config.max_new_tokens, wants_multiline(line_before, line_after, previous),
                           lookup_min_p=self.config.lookup_min_p, known_names=self.config.known_names)

    def key_for(self, window: Window, settings: GenSettings, context: Snapshot = EMPTY) -> str:
        return state_key(self.model_id, settings.tag(), window, context.digest)

    # -- requests -------------------------------------------------------------

    def shown_part(self, text: str, confidence, min_confidence: float | None = None, min_chars: int | None = None) -> str:
        """What a request shows of a full suggestion: the part the model is sure of (confidence gating), if it is
        long enough to be worth a Tab (a one-character suggestion saves no keystroke: Tab is one too)."""
        shown = gate(text, confidence, self.config.min_confidence if min_confidence is None else min_confidence)
        return shown if len(shown) >= (self.config.min_chars if min_chars is None else min_chars) else ""

    def _request(self, doc: str, version: int, state: DocState, invoked: bool, ready: bool) -> Request:
        window = state.window(self.config.prefix_chars, self.config.suffix_chars)
        self.workspace.requested(doc, state)
        context = self.workspace.snapshot(doc, state, window)
        key = self.key_for(window, self.settings_for(state), context) if ready else ""
        return Request(str(next(self._ids)), doc, version, state, window, key, time.monotonic(), key in self._planned,
                       0.0 if invoked else self.config.min_confidence, context, 1 if invoked else self.config.min_chars)

    def _from_memory(self, req: Request, waited: float = 0.0) -> Answer | None:
        entry = self.cache.get(req.key)
        if entry is not None:
            text = self.shown_part(entry.text, entry.confidence, req.min_confidence, req.min_chars)  # the cache keeps it whole
            self._used(req.key)
            return self._serve(req, Outcome(text, "cache", entry.depth, cache_ms=self._since(req.t0),
                                            hidden=bool(entry.text) and not text, debounce_ms=waited))
        hit = self.typed.lookup(req.window)
        if hit is not None:
            shown, rest = hit
            self._used(shown.key)
            return self._serve(req, Outcome(rest, "typed", shown.depth, cache_ms=self._since(req.t0), from_key=shown.key,
                                            debounce_ms=waited))
        return None

    async def _reused(self, req: Request, waited: float = 0.0) -> Answer | None:
        """The answer from memory or from the computation in flight for this very state; None when neither has it."""
        if not self.config.cache:
            return None
        answer = self._from_memory(req, waited)
        if answer is not None:
            return answer
        comp = self.inflight.get(req.key)
        if comp is None:
            return None
        self.scheduler.promote(comp.job, FOREGROUND)
        return await self._await(req, comp, "inflight", waited)

    def lookup(self, doc: str, version: int, state: DocState, invoked: bool = False) -> Answer | None:
        """The answer from memory (cache, type-through) at once, with no await; None when it needs more."""
        if self.handover is not None:  # a request answered from memory is the user at work too: no hand-over now
            self.handover.requested()
        if not self.config.cache or not self._loaded.future.done() or self.backend is None:
            return None
        answer = self._from_memory(self._request(doc, version, state, invoked, True))
        if answer is not None:
            self.waits.end(doc, "superseded")  # an older request still waiting out its debounce is of no use now
            self.scheduler.hush(HUSH_S)  # the prefetches this answer sets going start once the client has read it
        return answer

    async def complete(self, doc: str, version: int, state: DocState, invoked: bool = False,
                       arrived: float | None = None) -> Answer:
        """The answer for a state; `arrived`: when the request reached the server (monotonic), if it waited before."""
        t0 = time.monotonic()
        if self.handover is not None:
            self.handover.requested()
        ready = await self.ready()
        req = dataclasses.replace(self._request(doc, version, state, invoked, ready), t0=t0)
        if not ready:
            return self._finish(req, Outcome("", "none", error=self.load_error))

        answer = await self._reused(req)
        if answer is not None:
            self.waits.end(doc, "superseded")
            return answer
        previous = self._foreground.get(doc)
        if previous is not None and previous.key != req.key:
            self._cancel(previous, "superseded")  # its waiters get an empty answer at once
        wait = self.debounce.wait_for(doc, invoked, req.after_accept)
        left = wait.ms - self._since(arrived or t0)  # from the request's arrival: a wait for the model load counts
        if left > 0:  # only a request that needs the model waits, and a newer keystroke cuts the wait short
            answer = await self._debounced(req, left, wait.ms, wait.why)
            if answer is not None:
                return answer
        self.warmer.cancel(doc)
        comp = self._start(req.key, doc, state, req.window, self.settings_for(state), depth=0, context=req.context)
        self._foreground[doc] = comp
        return await self._await(req, comp, "model", wait.ms if left > 0 else 0.0, wait.why if left > 0 else "")

    async def _debounced(self, req: Request, left: float, ms: float, why: str) -> Answer | None:
        """Wait out what is `left` of the debounce `ms`: None to go on to the model, else the answer (empty when
        cut, or from memory)."""
        started = time.monotonic()
        try:
            cut = await self.waits.wait(req.doc, req.window, left / 1000)
        except asyncio.CancelledError:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client", debounce_ms=round(self._since(started), 3))
            raise
        if cut:
            self.stats.debounce["superseded"] += 1
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=cut, debounce_ms=round(self._since(started), 3))
            return self._finish(req, Outcome("", "none", debounce_ms=self._since(started), debounce_why=why))
        self.stats.debounce["waited"] += 1
        self.stats.debounce_ms.append(ms)
        return await self._reused(req, ms)  # a prefetch may have answered, or begun, this state meanwhile

    def _after(self, fn: Callable[[], None]) -> None:
        """Run fn once the answer is out: a 0 s timer runs after the callbacks already queued, which include the
        LSP layer's write of the response; an answer written at once (lookup) runs it right after (run_after)."""
        self._pending_after.append(fn)
        if len(self._pending_after) > 1:
            return  # the drain is scheduled already
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain call): now
            self.run_after()
            return
        loop.call_later(0, self.run_after)

    def run_after(self) -> None:
        """What the answers given so far set going (type-through, accept tracking, planning, log lines). The LSP
        layer calls it once it has written an answer from memory, so that a fast client's next message (its Tab)
        cannot overtake the suggestion it accepts."""
        pending, self._pending_after = self._pending_after, []
        for fn in pending:
            try:
                fn()
            except Exception:  # one failed step must not drop the others
                logger.exception("after an answer")

    @staticmethod
    def _since(t0: float) -> float:
        return (time.monotonic() - t0) * 1000

    async def _await(self, req: Request, comp: Computation, source: str, waited: float = 0.0, why: str = "") -> Answer:
        comp.waiters += 1
        result = asyncio.wrap_future(comp.job.future)
        result.add_done_callback(_retrieve)  # a waiter that left must not leave an unread exception behind
        try:
            prediction: Prediction = await asyncio.shield(result)
        except Cancelled:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=comp.cancel_reason or "shutdown")
            return self._finish(req, Outcome("", "none", debounce_ms=waited, debounce_why=why))
        except asyncio.CancelledError:
            comp.waiters -= 1
            if comp.waiters == 0 and not comp.prefetch:
                self._cancel(comp, "client")
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client")
            raise
        except Exception as exc:
            self.events.emit("error", where="model", message=f"{type(exc).__name__}: {exc}")
            return self._finish(req, Outcome("", "none", error=str(exc)))
        comp.waiters -= 1
        queue_ms = (comp.job.started_at - comp.job.queued_at) * 1000 if comp.job.started_at else 0.0
        depth = comp.depth if source == "inflight" else 0
        text = self.shown_part(prediction.text, prediction.confidence, req.min_confidence, req.min_chars)
        return self._serve(req, Outcome(text, source, depth, prediction, queue_ms, hidden=bool(prediction.text) and not text,
                                        debounce_ms=waited, debounce_why=why))

    def _serve(self, req: Request, out: Outcome) -> Answer:
        answer = self._finish(req, out)
        if out.text:
            self._after(lambda: self._shown_to_user(req, out))
        return answer

    def _shown_to_user(self, req: Request, out: Outcome) -> None:
        """What a suggestion on screen sets going, once its answer is out: type-through, accept tracking, speculation."""
        if self.config.cache:
            self.typed.add(Shown(req.window, out.text, req.key, out.depth))
        self._last_shown[req.doc] = (req.window, out.text)
        self.accepts.shown(req.id, req.doc, req.state, out.text, out.source == "typed")
        self._plan(req.doc, req.state, req.window, out.text, req.context)

    def _finish(self, req: Request, out: Outcome) -> Answer:
        latency = self._since(req.t0)
        # a suggestion gating hid still counts for the layer that had it ready: the answer came from there
        shown_source = out.source if out.text or out.hidden else "none"
        self._count(shown_source, latency, req.after_accept)
        if self.handover is not None:  # while a suggestion shows, a Tab may come: the hand-over's import holds off
            self.handover.shown(bool(out.text))
        self.stats.last_depth, self.stats.last_debounce_ms = out.depth, out.debounce_ms
        p = out.prediction or Prediction("")
        if out.prediction is not None and out.source == "model":
            self._count_reuse("request", p)
            self.debounce.model_answered(latency - out.debounce_ms)
        self._after(lambda: self.events.emit(  # after the answer is out: the log line costs the user nothing
            "completion", id=req.id, doc=req.doc, version=req.version, source=shown_source, origin=out.source,
            depth=out.depth, latency_ms=round(latency, 3), queue_ms=round(out.queue_ms, 3),
            cache_ms=round(out.cache_ms, 4), prefill_ms=round(p.prefill_ms, 3), decode_ms=round(p.decode_ms, 3),
            prefill_tokens=p.prefill_tokens, reused_tokens=p.reused_tokens, decode_tokens=p.decode_tokens,
            chars=len(out.text), key=short_key(req.key) if req.key else "", after_accept=req.after_accept,
            debounce_ms=round(out.debounce_ms, 3), **({"debounce_why": out.debounce_why} if out.debounce_why else {}),
            queue_depth=self.scheduler.depth(),
            context_tokens=p.context_tokens, context_chunks=len(req.context.chunks), reuse=reuse_of(p),
            **(self._engine_fields(p) if out.prediction is not None and out.source == "model" else {}),
            **({"hidden": True} if out.hidden else {}),
            **({"from_key": short_key(out.from_key)} if out.from_key else {}),
            **({"error": out.error[:200]} if out.error else {}),
            **({"text": out.text} if self.config.log_text and out.text else {}),
            **(self._depth_fields(req.doc) if out.text else {}),
        ))
        return Answer(req.id, out.text, shown_source, out.depth, req.key, latency)

    def _count(self, source: str, latency: float, after_accept: bool) -> None:
        s = self.stats
        s.sources[source] += 1
        s.latency_ms.append(latency)
        s.last_source, s.last_latency_ms = source, latency
        if after_accept:
            s.after_accept_requests += 1
            s.after_accept_ms.append(latency)
            if source in ("cache", "typed"):
                s.after_accept_from_cache += 1

    # -- documents ------------------------------------------------------------------

    def document_changed(self, doc: str, state: DocState | None) -> None:
        """Cancel work the new document state (None: the document is gone) can no longer use."""
        now = state.window(self.config.prefix_chars, self.config.suffix_chars) if state is not None else None
        if now is not None:
            self.debounce.edited(doc, time.monotonic())
        self.waits.end(doc, "closed" if now is None else "stale", unless_window=now)  # a newer keystroke: no wait goes on
        for key, comp in self.inflight.items():
            if comp.doc != doc or comp.job.done():
                continue
            if comp.prefetch:
                reachable = now is not None and comp.root is not None and (
                    now == comp.root or typed_length(comp.root, comp.chain + "\0", now) is not None
                )
                if not reachable:
                    self._cancel(comp, "closed" if now is None else "unreachable")
            elif now is None or now != comp.window:
                self._cancel(comp, "closed" if now is None else "stale")

    def document_closed(self, doc: str) -> None:
        self.accepts.closed(doc)
        self.document_changed(doc, None)
        self.debounce.closed(doc)
        self._last_shown.pop(doc, None)
        self.workspace.closed(doc)

    # -- workspace context and KV warm-up ---------------------------------------------

    def _count_reuse(self, kind: str, p: Prediction) -> None:
        total = self.stats.reuse[kind]
        total[0] += p.reused_tokens
        total[1] += p.reused_tokens + p.prefill_tokens
        if kind != "warmup":
            self.stats.last_context_tokens, self.stats.last_reuse = p.context_tokens, reuse_of(p)

    def _context_changed(self, doc: str, state: DocState, window: Window, context: Snapshot) -> None:
        """A new context for `doc`, or a move there: prefill its prompt in the background (foreground pre-empts it).

        When a suggestion is on screen here, its after-accept states are prefetched under the new
        context instead, so a Tab after the pause is still answered from memory (and warms the KV too).
        """
        if self.backend is None:
            return
        for _, comp in self.inflight.items():
            if comp.doc == doc and comp.prefetch and comp.context.digest != context.digest:
                self._cancel(comp, "context")
        shown = self._last_shown.get(doc)
        if shown is not None and shown[0] == window and self.config.speculation and self.config.depth > 0:
            self._prefetch_after(doc, state, shown[1], 0, window, "", context)
        elif self.config.warmup:
            self.warmer.submit(self.backend, doc, window, self.settings_for(state), context)

    @staticmethod
    def _workers(config: Config) -> int:
        """Model requests at once: a remote engine may batch them; the local one has one model and one KV store."""
        return config.parallel if config.backend == "openai" else 1

    def close(self) -> None:
        self.workspace.close()
        if self.handover is not None:
            self.handover.close()
        self.scheduler.stop()
