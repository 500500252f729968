"""One lifecycle for every model run: requests, prefetches and KV warm-ups.

A run is a closure on the scheduler that asks the backend for one prompt
window with the workspace context before it (predict, or warm for a prefill
only). Its kind's Tally counts it started, then finished or cancelled, and
each time a request pre-empted it; its end is reported on the event loop that
started it, never on the model thread. A request answered from a short window
(the prefill budget: predictor/local.py) sets going the whole window's prefill
in the background, so the next keystroke finds it computed.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Callable

from tabd.cache.state import Window
from tabd.daemon.context.chunk_store import EMPTY, Snapshot
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.fields import warmup_fields
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.scheduler import Job, Scheduler
from tabd.predictor.types import Backend, ContextChunk, GenSettings, Interrupted, Prediction

WHOLE_WARMUP_PRIORITY = 1  # as the warm-ups on open and focus (warmer.py): any request pre-empts it
Ended = Callable[[Job, "Prediction | None"], None]  # the job, and what it computed (None: it failed or was cancelled)


@dataclass
class Tally:
    """How the runs of one kind ended; started - finished - cancelled are queued or running now."""

    started: int = 0
    finished: int = 0
    cancelled: int = 0
    preempted: int = 0  # times a request stopped one (it was requeued: not an end)

    def counts(self, preempted: bool = True) -> dict[str, int]:
        """For tabd/stats (requests are never pre-empted, and their counts never had the key)."""
        counts = {"started": self.started, "finished": self.finished, "cancelled": self.cancelled}
        return {**counts, "preempted": self.preempted} if preempted else counts


@dataclass(frozen=True)
class ModelCall:
    """What one run computes: the suggestion (or, warm, the prefill only) for a prompt window under a context."""

    window: Window
    settings: GenSettings
    slot: str  # the backend's KV slot: one per document, and per speculation branch
    context: Snapshot = EMPTY
    warm: bool = False

    def shortened(self, p: Prediction) -> bool:
        """Whether `p` was computed on fewer lines than the window (the prefill budget's short window)."""
        return not self.warm and 0 < p.window_chars < len(self.window.prefix) + len(self.window.suffix)

    def run(self, backend: Backend, should_stop: Callable[[], bool], priority: int = 0) -> Prediction | None:
        """priority: the scheduler's for the run (0 a request; a prefetch its depth), for an engine shared with others."""
        ask = backend.warm if self.warm else backend.predict
        return ask(self.window.prefix, self.window.suffix, self.settings, should_stop, slot_id=self.slot,
                   context=chunks_of(self.context), priority=priority)


def chunks_of(context: Snapshot) -> list[ContextChunk]:
    """The snapshot as the predictor takes it: the prompt's chunks, then the texts to copy from."""
    return ([ContextChunk(c.path, c.text, comment=c.comment) for c in context.chunks]
            + ([ContextChunk(context.path, "", current=True)] if context.path else [])
            + [ContextChunk(path, text, lookup_only=True) for path, text in context.sources])


class ModelJobs:
    def __init__(self, scheduler: Scheduler, model: Model, events: EventLog | None = None,
                 follow_engine: bool = False) -> None:
        self.scheduler = scheduler
        self.model = model
        self.events = events
        # run as many jobs at once as the engine says it batches (a remote one, --parallel left at 1): llama-server's
        # slots, a few for vLLM; a request of another document then runs beside the one before, in the engine
        self.follow_engine = follow_engine
        self._warming: dict[str, Job] = {}  # slot -> the whole window's warm-up after a short-window answer
        self.whole_warmups = 0  # of those, finished

    def start(self, call: ModelCall, priority: int, label: str, tally: Tally, ended: Ended,
              preempted: Callable[[], None] = lambda: None, doc: str = "") -> Job:
        """Queue the run (the model must be loaded); `preempted` is told on the model thread, `ended` on this loop;
        `doc`: the document it is for (a request of another document pre-empts a request of it)."""
        backend = self.model.backend
        if backend is None:
            raise RuntimeError("no model is loaded")
        parallel = getattr(backend, "parallel", 1)
        if self.follow_engine and isinstance(parallel, int) and parallel > self.scheduler.workers:
            self.scheduler.widen(parallel)
        job: Job | None = None

        def run(should_stop: Callable[[], bool]) -> Prediction | None:
            try:
                pred = call.run(backend, should_stop, max(0, job.priority if job is not None else priority))
            except Interrupted:
                if job is None or not job.cancelled:  # stopped for a request, not for good: the scheduler requeues it
                    tally.preempted += 1
                    preempted()
                raise
            if pred is not None and job is not None and job.preemptions:
                pred = replace(pred, preemptions=job.preemptions, paused_ms=job.paused_s * 1000)
            if pred is not None and call.shortened(pred):
                self._warm_whole(call)
            return pred

        job = self.scheduler.submit(run, priority, label, doc)
        tally.started += 1
        loop = asyncio.get_running_loop()
        done_job = job
        job.future.add_done_callback(lambda fut: loop.call_soon_threadsafe(self._ended, done_job, fut, tally, ended))
        return job

    def _warm_whole(self, call: ModelCall) -> None:
        """An answer from the lines nearest the cursor (a cold prompt over the prefill budget): prefill the whole
        window in the background, so the next keystroke there reuses it. On the model thread; one per slot, the
        newest (an older one's chunks are kept anyway)."""
        backend = self.model.backend
        if backend is None:
            return
        whole = replace(call, warm=True)
        previous = self._warming.get(call.slot)
        if previous is not None:
            self.cancel(previous)

        def run(should_stop: Callable[[], bool]) -> Prediction | None:
            p = whole.run(backend, should_stop, WHOLE_WARMUP_PRIORITY)
            self.whole_warmups += 1
            if p is not None and self.events is not None:
                self.events.emit("warmup", doc=call.slot, whole=True, **warmup_fields(p))
            return p

        self._warming = {slot: job for slot, job in self._warming.items() if not job.done()}
        self._warming[call.slot] = self.scheduler.submit(run, WHOLE_WARMUP_PRIORITY, f"warm-whole:{call.slot}")

    def cancel(self, job: Job) -> None:
        if not job.done():
            self.scheduler.cancel(job)

    @staticmethod
    def _ended(job: Job, fut: Future[Any], tally: Tally, ended: Ended) -> None:
        if fut.cancelled() or fut.exception() is not None:
            tally.cancelled += 1
            ended(job, None)
            return
        tally.finished += 1
        ended(job, fut.result())
