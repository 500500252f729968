"""The completion service's model work: one Computation per state key, run on the scheduler, kept when done.

A mixin of CompletionService (daemon/runtime/service.py), which owns the state
these methods use (backend, scheduler, inflight, cache, typed, stats, events,
_foreground, shown_part, _prefetch_after, _count_reuse). A computation's
waiters and its answer are the service's (_await); here it starts, ends and
is cancelled.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tabd.daemon.context.store import EMPTY, Snapshot
from tabd.cache.key import short_key
from tabd.cache.state import DocState, Window
from tabd.cache.store import Entry
from tabd.cache.typed import Shown
from tabd.daemon.runtime.scheduler import FOREGROUND, Job
from tabd.daemon.runtime.workspace import chunks_of, reuse_of
from tabd.predictor.types import GenSettings, Interrupted, Prediction


@dataclass
class Computation:
    """One model run for one state key, shared by every request that wants that key."""

    key: str
    doc: str
    state: DocState
    window: Window
    settings: GenSettings
    depth: int  # 0 for a request, n for a prefetch n accepts ahead
    root: Window | None = None  # for a prefetch: the user's state it was planned from
    chain: str = ""  # ...and the text the accepts would insert from there
    job: Job | None = None
    waiters: int = 0
    cancel_reason: str = ""  # why _cancel stopped it, for the waiters' cancel events
    context: Snapshot = EMPTY  # the workspace context before the prompt
    kinds: tuple[str, ...] = ()  # for a prefetch: the accepts from the user's state ("all", "word", "line")

    @property
    def prefetch(self) -> bool:
        return self.depth > 0


class ModelWork:
    def _start(self, key, doc, state, window, settings, depth, root=None, chain="", context: Snapshot = EMPTY,
               kinds=()) -> Computation:
        comp = Computation(key, doc, state, window, settings, depth, root, chain, context=context, kinds=kinds)
        backend = self.backend
        slot = f"{doc}#{'.'.join(kinds)}" if kinds else doc  # each speculation branch keeps its own KV
        extra = {"context": chunks_of(context)} if context.digest else {}  # backends without context take no such argument

        def run(should_stop):
            try:
                return backend.predict(window.prefix, window.suffix, settings, should_stop, slot_id=slot, **extra)
            except Interrupted:
                if comp.job is None or not comp.job.cancelled:  # stopped for a request, not for good: requeued
                    self._preempted(comp)  # on the model thread, as the scheduler requeues it
                raise

        comp.job = self.scheduler.submit(run, FOREGROUND if depth == 0 else depth, f"{'prefetch' if depth else 'request'}:{short_key(key)}")
        loop = asyncio.get_running_loop()
        if depth == 0:
            self.stats.model["started"] += 1
        if self.config.cache:
            self.inflight.add(key, comp)
        comp.job.future.add_done_callback(lambda fut: loop.call_soon_threadsafe(self._done, comp, fut))
        return comp

    def _done(self, comp: Computation, fut) -> None:
        self.inflight.discard(comp.key, comp)
        if self._foreground.get(comp.doc) is comp:
            del self._foreground[comp.doc]
        failed = fut.cancelled() or fut.exception() is not None
        if not comp.prefetch:
            self.stats.model["cancelled" if failed else "finished"] += 1
        if failed:
            if comp.prefetch:
                self.stats.prefetch["cancelled"] += 1
                self.events.emit("prefetch", outcome="cancelled", depth=comp.depth, key=short_key(comp.key), doc=comp.doc,
                                 reason=comp.cancel_reason or "shutdown")
            return
        prediction: Prediction = fut.result()
        if self.config.cache:
            self.cache.put(comp.key, Entry(prediction.text, comp.depth, prediction.confidence))
        if comp.prefetch:
            self.stats.prefetch["finished"] += 1
            self._count_reuse("prefetch", prediction)
            self.events.emit(
                "prefetch", outcome="finished", depth=comp.depth, branch=".".join(comp.kinds), key=short_key(comp.key),
                doc=comp.doc,
                context_tokens=prediction.context_tokens, reuse=reuse_of(prediction),
                prefill_tokens=prediction.prefill_tokens, reused_tokens=prediction.reused_tokens,
                decode_tokens=prediction.decode_tokens, prefill_ms=round(prediction.prefill_ms, 3),
                decode_ms=round(prediction.decode_ms, 3), chars=len(prediction.text), queue_depth=self.scheduler.depth(),
            )
            shown = self.shown_part(prediction.text, prediction.confidence)  # speculation plans from what is shown
            if shown and self.config.cache:
                self.typed.add(Shown(comp.window, shown, comp.key, comp.depth))
                self._prefetch_after(comp.doc, comp.state, shown, comp.depth, comp.root, comp.chain, comp.context, comp.kinds)

    def _cancel(self, comp: Computation, reason: str) -> None:
        if comp.job is not None and not comp.job.done():
            comp.cancel_reason = comp.cancel_reason or reason
            self.scheduler.cancel(comp.job)

    def _preempted(self, comp: Computation) -> None:
        self.stats.prefetch["preempted"] += 1
        self.events.emit("prefetch", outcome="preempted", depth=comp.depth, key=short_key(comp.key), doc=comp.doc)
