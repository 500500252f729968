"""Model workers: threads that run jobs by priority.

Torch on 2 cores gains nothing from two model workers, so a local model gets
one. A remote engine batches concurrent requests itself, so it may get a few.
Foreground jobs (priority 0) pre-empt background prefetches between decode
steps: the prefetch is put back in the queue and restarts later, cheaply,
because the model keeps its KV cache. Cancelled jobs stop at the next step.
Between documents, the newest request wins: a foreground job of one document
stops at its next prefill chunk or decode step for a newer foreground job of
another document, and is put back behind it (foreground jobs run newest
first), to resume from the KV it kept once the newer one is done. Within one
document the service already cancels the older state (supersede).
The workers run below the LSP thread's OS priority (priority.py): a cache hit
is answered on a core before a prefetch's next step.
With several workers on an engine that does not order requests by priority,
a background job does not start while a request the user waits for runs or
waits (holds_background): there it would only compete with it in the engine.
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable

from tabd.daemon.runtime.priority import BACKGROUND_NICE, run_in_background
from tabd.predictor.types import Interrupted

FOREGROUND = 0
MAX_WORKERS = 32  # as --parallel's bound


class Cancelled(Exception):
    """The job was cancelled before it finished."""


class Job:
    def __init__(self, fn: Callable[[Callable[[], bool]], Any], priority: int, label: str = "", doc: str = "") -> None:
        self.fn = fn
        self.priority = priority
        self.label = label
        self.doc = doc  # the document it is for ("": none; such a job neither pre-empts nor is pre-empted by one)
        self.order = 0  # its place among foreground jobs: the higher, the newer (newest first)
        self.future: Future[Any] = Future()
        self.cancelled = False
        self.preemptions = 0
        self.queued_at = 0.0
        # when the user asked for it: its queueing, or its promotion to a request (a prefetch a request now awaits); a
        # request's wait since then is taken from its prefill budget (Query.waited_ms)
        self.asked_at = 0.0
        self.started_at = 0.0  # its first start (queue_ms is the wait for it)
        self.paused_s = 0.0  # time spent put back in the queue after pre-emptions, behind newer work
        self._paused_at = 0.0
        self.held = False  # it waited for a request to end before it could start (counted once)

    def done(self) -> bool:
        return self.future.done()


class Scheduler:
    def __init__(self, workers: int = 1, nice: int = BACKGROUND_NICE,
                 holds_background: Callable[[], bool] = lambda: False) -> None:
        self._nice = nice
        self.nice: int | None = None  # the workers' nice value once they run (tabd/stats), the same for all
        self._heap: list[tuple[int, int, Job]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._hush_until = 0.0  # monotonic: background jobs start no sooner (hush)
        self.running: set[Job] = set()
        self.faults = 0  # errors outside any job's own code, survived (reported in tabd/stats)
        self.last_fault = ""
        # True while background jobs must wait for running requests (an engine without priorities; given by compose())
        self.holds_background = holds_background
        self.held = 0  # background jobs that waited for a request to end (tabd/stats)
        self.workers = max(1, workers)
        self._threads = [
            threading.Thread(target=self._work, name=f"tabd-model-{i}", daemon=True) for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()

    def widen(self, workers: int) -> None:
        """Run up to `workers` jobs at once from now on (an engine that batches said how many it runs side by side)."""
        with self._cond:
            if self._stopped:
                return
            while self.workers < min(MAX_WORKERS, workers):
                thread = threading.Thread(target=self._work, name=f"tabd-model-{self.workers}", daemon=True)
                self._threads.append(thread)
                self.workers += 1
                thread.start()
            self._cond.notify_all()

    # -- queue ------------------------------------------------------------------

    def submit(self, fn: Callable[[Callable[[], bool]], Any], priority: int, label: str = "", doc: str = "") -> Job:
        job = Job(fn, priority, label, doc)
        job.queued_at = job.asked_at = time.monotonic()
        with self._cond:
            if self._stopped:
                job.future.set_exception(Cancelled("scheduler stopped"))
                return job
            job.order = next(self._seq)
            self._push(job)
            self._cond.notify()
        return job

    def _push(self, job: Job) -> None:
        """Queue the job: by priority, then a document's requests newest first (the user is where the latest request
        is; a request put back after a pre-emption keeps its place among them), then the rest in order."""
        rank = -job.order if job.priority <= FOREGROUND and job.doc else next(self._seq)
        heapq.heappush(self._heap, (job.priority, rank, job))

    def promote(self, job: Job, priority: int) -> None:
        """Raise a queued or running job's priority (a waiting request now needs it: it counts as asked now)."""
        with self._cond:
            if job.done() or priority >= job.priority:
                return
            job.priority = priority
            job.order = next(self._seq)
            if priority <= FOREGROUND:
                job.asked_at = time.monotonic()
            if job not in self.running:
                self._push(job)
                self._cond.notify()

    def cancel(self, job: Job) -> None:
        with self._cond:
            job.cancelled = True
            if job not in self.running and not job.done():
                job.future.set_exception(Cancelled(job.label))

    def depth(self) -> int:
        """Jobs waiting (not counting the running one)."""
        with self._cond:
            return sum(1 for p, _, j in self._heap if not j.cancelled and not j.done() and p == j.priority)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            for _, _, job in self._heap:
                if not job.done():
                    job.cancelled = True
                    job.future.set_exception(Cancelled("shutdown"))
            self._heap.clear()
            for job in self.running:
                job.cancelled = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # -- worker -----------------------------------------------------------------

    def _foreground_waiting(self, newer_than: Job | None = None) -> bool:
        """Whether a request waits in the queue; with `newer_than`, a request of another document asked after it."""
        with self._cond:
            for p, _, job in self._heap:
                if p == FOREGROUND and job.priority == FOREGROUND and not job.cancelled and not job.done():
                    if newer_than is None:
                        return True
                    if job.doc and job.doc != newer_than.doc and job.order > newer_than.order:
                        return True
        return False

    def _should_stop(self, job: Job) -> bool:
        if job.cancelled or self._stopped:
            return True
        if len(self.running) < self.workers:
            return False  # a free worker takes whatever waits
        if job.priority <= FOREGROUND:
            # a request yields to a newer request of another document (the newest state within one is the
            # service's: it cancels the older); one for no document (an edit score) never stops for them
            return job.priority == FOREGROUND and bool(job.doc) and self._foreground_waiting(newer_than=job)
        # a prefetch yields only when a request waits and no worker is free for it
        return self._foreground_waiting()

    def hush(self, seconds: float) -> None:
        """Background jobs start no sooner than `seconds` from now (foreground ones start at once): an answer was
        just written from memory, and the client reading it should not meet a prefetch that has just taken a core."""
        with self._cond:
            self._hush_until = max(self._hush_until, time.monotonic() + seconds)

    def _next(self) -> Job | None:
        with self._cond:
            while True:
                if self._stopped:
                    return None
                hushed = self._hush_until - time.monotonic()
                while self._heap:
                    p, _, job = self._heap[0]
                    if p != job.priority or job.cancelled or job.done():
                        heapq.heappop(self._heap)  # a stale entry: promoted, cancelled or already run
                        continue
                    if p > FOREGROUND and hushed > 0:
                        break  # the best job is a background one, and it waits out the hush
                    if p > FOREGROUND and self._request_running() and self.holds_background():
                        if not job.held:
                            job.held, self.held = True, self.held + 1
                        break  # woken when the request ends (_run)
                    heapq.heappop(self._heap)
                    if job.preemptions == 0 and not job.future.set_running_or_notify_cancel():
                        continue  # cancelled through its future before it started
                    self.running.add(job)
                    return job
                self._cond.wait(hushed if self._heap and hushed > 0 else None)

    def _request_running(self) -> bool:
        return any(job.priority <= FOREGROUND for job in self.running)

    def _work(self) -> None:
        self.nice = run_in_background(threading.current_thread().name, self._nice)
        while True:
            job = None
            try:
                job = self._next()
                if job is None:
                    return
                self._run(job)
            except BaseException as exc:  # never let the model thread die: every later request would wait forever
                with self._cond:
                    self.faults += 1
                    self.last_fault = f"{type(exc).__name__}: {exc}"
                    if job is not None:
                        self.running.discard(job)
                        self._settle(job, exc=exc)

    def _run(self, job: Job) -> None:
        now = time.monotonic()
        if job.started_at == 0.0:
            job.started_at = now
        elif job._paused_at:
            job.paused_s += now - job._paused_at
            job._paused_at = 0.0
        try:
            self._call(job)
        finally:
            if job.priority <= FOREGROUND:
                with self._cond:
                    self._cond.notify_all()  # background jobs held for it may start

    def _call(self, job: Job) -> None:
        try:
            result = job.fn(lambda: self._should_stop(job))
        except Interrupted:
            with self._cond:
                self.running.discard(job)
                if job.cancelled or self._stopped:
                    self._settle(job, exc=Cancelled(job.label))
                else:
                    job.preemptions += 1
                    job._paused_at = time.monotonic()
                    self._push(job)
            return
        except BaseException as exc:  # the job's error goes to whoever waits for it
            with self._cond:
                self.running.discard(job)
                self._settle(job, exc=exc)
            return
        with self._cond:
            self.running.discard(job)
            self._settle(job, result=result)

    @staticmethod
    def _settle(job: Job, result: Any = None, exc: BaseException | None = None) -> None:
        """Give the job's waiter its result once. Called under the lock where it races cancel(), which settles a
        job that is not running: checked and set in one step, so neither side sets a settled future again."""
        if job.done():
            return
        try:
            if exc is not None:
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
        except InvalidStateError:  # cancelled through the future itself meanwhile
            pass
