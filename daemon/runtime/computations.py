"""Model runs by state key, for a request or a prefetch: started, shared while in flight, remembered when done,
and cancelled when the user's document can no longer use them.

A request of one document pre-empts an older request of another (scheduler.py); the older one resumes from
its kept KV once the newer is done, unless the user is seen elsewhere since its pre-emption: a later request in
another document, or a focus on one (`elsewhere`). Its KV progress stays in the backend either way.
"""
from __future__ import annotations

from tabd.cache.state import Window, short_key
from tabd.cache.store import typed_length
from tabd.daemon.runtime.events import EventLog, Signal
from tabd.daemon.runtime.fields import prediction_fields
from tabd.daemon.runtime.jobs import Computation, ModelJobs, PromptReuse, Tally
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.scheduler import FOREGROUND
from tabd.predictor.types import Prediction


class Computations:
    def __init__(self, jobs: ModelJobs, memory: Memory, events: EventLog) -> None:
        self.jobs = jobs
        self.memory = memory
        self.events = events
        self.request_runs = Tally()  # requests' model runs
        self.prefetch_runs = Tally()
        self.reuse = PromptReuse()  # of requests' and prefetches' prompts
        # a prefetch finished: the speculator plans on from it, the debounce learns how long a model call takes
        self.prefetched: Signal[[Computation, Prediction]] = Signal()
        self._foreground: dict[str, Computation] = {}  # doc -> its latest request's computation

    def supersede(self, doc: str, key: str) -> None:
        """A request for `key` in the document: its previous request's run, for another key, is of no use now."""
        previous = self._foreground.get(doc)
        if previous is not None and previous.key != key:
            self.cancel(previous, "superseded")  # its waiters get an empty answer at once

    def request(self, comp: Computation) -> Computation:
        """A request's run: it runs its document's prompt itself, so the document's warm-up (warmer.py) ends."""
        self.jobs.cancel_warmup(comp.doc)
        self.elsewhere(comp.doc)
        self._foreground[comp.doc] = self._start(comp, FOREGROUND, "request", self.request_runs)
        return comp

    def elsewhere(self, doc: str) -> None:
        """The user is in `doc` (a request there, or a focus): the requests of other documents that a newer request
        pre-empted stop instead of resuming; one never pre-empted goes on (it may be another pane's, still awaited)."""
        for other, comp in list(self._foreground.items()):
            if other != doc and comp.job is not None and comp.job.preemptions > 0:
                self.cancel(comp, "elsewhere")

    def prefetch(self, comp: Computation) -> Computation:
        return self._start(comp, comp.depth, "prefetch", self.prefetch_runs)

    def _start(self, comp: Computation, priority: int, kind: str, tally: Tally) -> Computation:
        comp.job = self.jobs.start(comp, priority, f"{kind}:{short_key(comp.key)}", tally,
                                   lambda job, p: self._ended(comp, p), lambda: self._preempted(comp), comp.doc)
        self.memory.started(comp)
        return comp

    def cancel(self, comp: Computation, reason: str) -> None:
        if comp.job is not None and not comp.job.done():
            comp.cancel_reason = comp.cancel_reason or reason
            self.jobs.cancel(comp.job)

    def cancel_unreachable(self, doc: str, now: Window | None) -> None:
        """The document's state is now `now` (None: it is gone): cancel what that state can no longer use."""
        for comp in self.memory.runs_of(doc):
            if comp.prefetch:
                reachable = now is not None and comp.root is not None and (
                    now == comp.root or now == comp.window  # the user is where it was planned from, or its state
                    or typed_length(comp.root, comp.chain + "\0", now) is not None
                )
                if not reachable:
                    self.cancel(comp, "closed" if now is None else "unreachable")
            elif now is None or now != comp.window:
                self.cancel(comp, "closed" if now is None else "stale")

    def closed(self, doc: str) -> None:
        self.cancel_unreachable(doc, None)

    def cancel_prefetches(self, doc: str, unless_digest: str) -> None:
        """The document's context changed: its prefetches under another context compute keys nobody will ask."""
        for comp in self.memory.runs_of(doc):
            if comp.prefetch and comp.context.digest != unless_digest:
                self.cancel(comp, "context")

    def _ended(self, comp: Computation, prediction: Prediction | None) -> None:
        self.memory.ended(comp, prediction)
        if self._foreground.get(comp.doc) is comp:
            del self._foreground[comp.doc]
        if not comp.prefetch:
            if prediction is not None:
                self.reuse.reused("request", prediction)
            return
        if prediction is None:
            self.events.emit("prefetch", outcome="cancelled", depth=comp.depth, key=short_key(comp.key), doc=comp.doc,
                             reason=comp.cancel_reason or "shutdown")
            return
        self.reuse.reused("prefetch", prediction)
        self.events.emit("prefetch", outcome="finished", depth=comp.depth, branch=comp.branch, key=short_key(comp.key),
                         doc=comp.doc, **prediction_fields(prediction), chars=len(prediction.text),
                         queue_depth=self.jobs.scheduler.depth())
        self.prefetched(comp, prediction)

    def _preempted(self, comp: Computation) -> None:
        """On the model thread, as the scheduler requeues it."""
        if comp.prefetch:
            self.events.emit("prefetch", outcome="preempted", depth=comp.depth, key=short_key(comp.key), doc=comp.doc)
