"""One lifecycle for every model run: requests, prefetches, KV warm-ups, the model load, the hand-over, next edits.

`queue` is the one way a run reaches the model worker (scheduler.py): its kind's Tally counts it started, then
finished or cancelled, and each time a request pre-empted it; its end is told with what it computed on the event
loop that queued it (never on the model thread), or, queued off any loop (the load, the hand-over's thread), on the
thread that ended it. ModelJobs runs prompts through it: a request or a prefetch asks the backend for the
suggestion at a prompt window with the workspace context before it (a Computation, the run for one state key, is
such a prompt: it goes to the backend as it is), a warm-up for its prefill only, one per document at a time (a
request of the document cancels it: cancel_warmup). A request answered from a short window (the prefill budget:
predictor/backends/local.py) sets going the whole window's prefill in the background, so the next keystroke finds
it computed. Each kind of run is counted (Tally: how runs ended; PromptReuse: how much of their prompts the kept KV
covered; report.py reads both).
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol

from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import EMPTY, Snapshot
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.fields import warmup_fields
from tabd.daemon.runtime.scheduler import Job, Scheduler
from tabd.daemon.runtime.stats import REUSE_KINDS, reuse_of
from tabd.predictor.types import Backend, ContextChunk, GenSettings, Interrupted, Prediction, Query

if TYPE_CHECKING:  # the model loads through `queue` (loaded_model.py): it imports this module
    from tabd.daemon.runtime.loaded_model import Model

WHOLE_WARMUP_PRIORITY = 1  # as the warm-ups on open and focus (warmer.py): any request pre-empts it
Work = Callable[[Callable[[], bool]], Any]  # a run on the model thread, given its should_stop
Ended = Callable[[Job, Any], None]  # the job, and what it computed (None: it failed or was cancelled)


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


@dataclass
class PromptReuse:
    """Prompt tokens [reused, total] per kind of model run: what share of each prompt the kept KV covered."""

    reuse: dict[str, list[int]] = field(default_factory=lambda: {kind: [0, 0] for kind in REUSE_KINDS})
    last_context_tokens: int = 0
    last: Prediction | None = None  # the last request's or prefetch's run (its share is worked out when read)

    def reused(self, kind: str, p: Prediction) -> None:
        total = self.reuse[kind]
        total[0] += p.reused_tokens
        total[1] += p.reused_tokens + p.prefill_tokens
        if kind != "warmup":
            self.last_context_tokens, self.last = p.context_tokens, p

    @property
    def last_reuse(self) -> float:
        return reuse_of(self.last) if self.last is not None else 0.0


@dataclass
class Computation:
    """One model run for one state key, shared by every request that wants that key (the in-flight table's handle)."""

    key: str
    doc: str
    state: DocState
    window: Window
    settings: GenSettings
    depth: int  # 0 for a request, n for a prefetch n accepts ahead
    root: Window | None = None  # for a prefetch: the user's state it was planned from
    chain: str = ""  # ...and the text the accepts would insert from there
    context: Snapshot = EMPTY  # the workspace context before the prompt
    kinds: tuple[str, ...] = ()  # for a prefetch: the accepts from the user's state ("all", "word", "line")
    job: Job | None = None  # set when it starts
    waiters: int = 0
    cancel_reason: str = ""  # why it was cancelled, for the waiters' cancel events
    invoked: bool = False  # for a prefetch: planned from an invoked request's answer, for the invoked one after it

    @property
    def prefetch(self) -> bool:
        return self.depth > 0

    @property
    def slot(self) -> str:
        """The backend's KV slot: each speculation branch keeps its own."""
        return f"{self.doc}#{'.'.join(self.kinds)}" if self.kinds else self.doc

    @property
    def branch(self) -> str:
        return ".".join(self.kinds)


def queue(scheduler: Scheduler, work: Work, priority: int, label: str, tally: Tally | None = None,
          ended: Ended | None = None, preempted: Callable[[], None] = lambda: None, doc: str = "") -> Job:
    """Queue `work` on the model worker, counted in `tally`; `ended` is told its end, `preempted` (on the model
    thread) each time a request stops it; `doc`: the document it is for (a request of another document pre-empts a
    request of it; "" for none)."""
    job: Job | None = None

    def counted(should_stop: Callable[[], bool]) -> Any:
        try:
            return work(should_stop)
        except Interrupted:
            if job is None or not job.cancelled:  # stopped for a request, not for good: the scheduler requeues it
                if tally is not None:
                    tally.preempted += 1
                preempted()
            raise

    job = scheduler.submit(counted, priority, label, doc)
    if tally is None and ended is None:
        return job
    if tally is not None:
        tally.started += 1
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    queued = job
    if loop is None:
        job.future.add_done_callback(lambda fut: _ended(queued, fut, tally, ended))
    else:
        job.future.add_done_callback(lambda fut: loop.call_soon_threadsafe(_ended, queued, fut, tally, ended))
    return job


def _ended(job: Job, fut: Future[Any], tally: Tally | None, ended: Ended | None) -> None:
    failed = fut.cancelled() or fut.exception() is not None
    if tally is not None:
        if failed:
            tally.cancelled += 1
        else:
            tally.finished += 1
    if ended is not None:
        ended(job, None if failed else fut.result())


class Prompt(Protocol):
    """What one run computes from: a prompt window under a context, in a KV slot (a Computation is one)."""

    @property
    def window(self) -> Window: ...
    @property
    def settings(self) -> GenSettings: ...
    @property
    def slot(self) -> str: ...  # the backend's KV slot: one per document, and per speculation branch
    @property
    def context(self) -> Snapshot: ...


@dataclass(frozen=True)
class ModelCall:
    """A prompt that has no Computation of its own (a warm-up's)."""

    window: Window
    settings: GenSettings
    slot: str
    context: Snapshot = EMPTY


def shortened(prompt: Prompt, p: Prediction) -> bool:
    """Whether `p` was computed on fewer characters than the window (the prefill budget's short window)."""
    return 0 < p.window_chars < len(prompt.window.prefix) + len(prompt.window.suffix)


def asked(prompt: Prompt, backend: Backend, should_stop: Callable[[], bool], priority: int,
          warm: bool = False, waited_ms: float = 0.0) -> Prediction | None:
    """The backend's suggestion for the prompt (warm: its prefill only); priority: the scheduler's for the run (0 a
    request; a prefetch its depth), for an engine shared with others; waited_ms: a request's wait so far (its budget's)."""
    ask = backend.warm if warm else backend.predict
    return ask(Query(prompt.window.prefix, prompt.window.suffix, prompt.settings, prompt.slot, chunks_of(prompt.context),
                     priority, waited_ms), should_stop)


def waited_ms(job: Job | None) -> float:
    """How long the job has waited since it was asked (Job.asked_at), now that it runs: behind the worker's queue, a
    chunk of other work under way (its own document's warm-up, a prefetch), pauses behind newer requests."""
    return max(0.0, time.monotonic() - job.asked_at) * 1000 if job is not None and job.asked_at else 0.0


def chunks_of(context: Snapshot) -> list[ContextChunk]:
    """The snapshot as the predictor takes it: the prompt's chunks, then the texts to copy from."""
    return ([ContextChunk(c.path, c.text, comment=c.comment) for c in context.chunks]
            + ([ContextChunk(context.path, "", current=True)] if context.path else [])
            + [ContextChunk(path, text, lookup_only=True) for path, text in context.sources])


class ModelJobs:
    """Prompts run through the lifecycle on the loaded model."""

    def __init__(self, scheduler: Scheduler, model: Model, events: EventLog | None = None,
                 follow_engine: bool = False) -> None:
        self.scheduler = scheduler
        self.model = model
        self.events = events
        # run as many jobs at once as the engine says it batches (a remote one, --parallel left at 1): llama-server's
        # slots, a few for vLLM; a request of another document then runs beside the one before, in the engine
        self.follow_engine = follow_engine
        self._warming: dict[str, Job] = {}  # slot -> the whole window's warm-up after a short-window answer
        self._warmups: dict[str, Job] = {}  # document -> its warm-up (warmer.py), one at a time
        self.whole = Tally()  # those warm-ups

    def start(self, prompt: Prompt, priority: int, label: str, tally: Tally, ended: Ended,
              preempted: Callable[[], None] = lambda: None, doc: str = "") -> Job:
        """Queue the prompt's suggestion (the model must be loaded); `preempted` is told on the model thread, `ended`
        on this loop; `doc`: the document it is for (a request of another document pre-empts a request of it)."""
        backend = self._backend()
        job: Job | None = None

        def run(should_stop: Callable[[], bool]) -> Prediction | None:
            pred = asked(prompt, backend, should_stop, max(0, job.priority if job is not None else priority),
                         waited_ms=waited_ms(job))
            if pred is not None and job is not None and job.preemptions:
                pred = replace(pred, preemptions=job.preemptions, paused_ms=job.paused_s * 1000)
            if pred is not None and shortened(prompt, pred):
                self._warm_whole(prompt, backend)
            return pred

        job = queue(self.scheduler, run, priority, label, tally, ended, preempted, doc)
        return job

    def warm(self, prompt: Prompt, priority: int, label: str, tally: Tally, ended: Ended) -> Job:
        """Queue the prompt's prefill alone (the model must be loaded): a KV warm-up of its document (its slot), in
        place of one still queued or running there."""
        backend = self._backend()
        doc = prompt.slot
        self.cancel_warmup(doc)

        def over(job: Job, p: Any) -> None:
            if self._warmups.get(doc) is job:
                del self._warmups[doc]
            ended(job, p)

        job = self._warmups[doc] = queue(self.scheduler, lambda stop: asked(prompt, backend, stop, priority, warm=True),
                                         priority, label, tally, over)
        return job

    def cancel_warmup(self, doc: str) -> None:
        """A request runs the document's prompt itself: a warm-up still queued would only rewind its KV after it."""
        job = self._warmups.pop(doc, None)
        if job is not None:
            self.cancel(job)

    def _backend(self) -> Backend:
        backend = self.model.backend
        if backend is None:
            raise RuntimeError("no model is loaded")
        parallel = getattr(backend, "parallel", 1)
        if self.follow_engine and isinstance(parallel, int) and parallel > self.scheduler.workers:
            self.scheduler.widen(parallel)
        return backend

    def _warm_whole(self, prompt: Prompt, backend: Backend) -> None:
        """An answer from the lines nearest the cursor (a cold prompt over the prefill budget): prefill the whole
        window in the background, so the next keystroke there reuses it. On the model thread; one per slot, the
        newest (an older one's chunks are kept anyway)."""
        previous = self._warming.get(prompt.slot)
        if previous is not None:
            self.cancel(previous)

        def run(should_stop: Callable[[], bool]) -> Prediction | None:
            p = asked(prompt, backend, should_stop, WHOLE_WARMUP_PRIORITY, warm=True)
            if p is not None and self.events is not None:
                self.events.emit("warmup", doc=prompt.slot, whole=True, **warmup_fields(p))
            return p

        self._warming = {slot: job for slot, job in self._warming.items() if not job.done()}
        self._warming[prompt.slot] = queue(self.scheduler, run, WHOLE_WARMUP_PRIORITY, f"warm-whole:{prompt.slot}",
                                           self.whole)

    def cancel(self, job: Job) -> None:
        if not job.done():
            self.scheduler.cancel(job)
