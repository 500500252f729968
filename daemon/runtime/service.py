"""The completion service: how a keystroke travels from a document state to a suggestion, in one pass.

answer(asked) first asks memory for an answer ready under the state's identity (a prefetch's, the request after a
Tab): that one goes out before any key is built, and its Request is built once it is out, for what it sets going.
Otherwise it builds the request once and looks in memory once (cache, type-through); an answer there is returned
at once, with no await. Otherwise it returns the awaitable of the rest: the run in flight for the same key, or the
debounce and then one model run. Afterwards the speculator plans the states after an accept as background prefetches.
It speaks plain dataclasses (Asked in, Answer out): the LSP layer converts, the predictor computes.

Each step is a collaborator with one job, passed in; compose() builds the default set:

  requests     RequestBuilder  the Request for what was asked (window, settings, context, key, gating)
  memory       Memory          cache (and its answers ready by state), type-through and in-flight runs
  computations Computations    model runs by key (jobs.py: one lifecycle with the warm-ups)
  speculator   Speculator      what to compute after an answer; what accepts teach
  debounce     Debounce, Waits how long a request that needs the model waits first, and the waiting ones
  activity     Listeners       who hears what the user does (the hand-over)
  answers      Answers         the answers' counters (report.py reads them, and every collaborator's own)
  docs         DocumentEvents  what the editor does to documents (opened, edited, closed: a Signal)
  edits        EditRuns        the model's runs for next edits
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from concurrent.futures import Future
from typing import Any, Awaitable, Callable

from tabd.cache.state import DocState
from tabd.daemon.runtime.activity import Listeners
from tabd.daemon.runtime.answer import (DEBOUNCED, LOADING, SUPERSEDED, Answer, Outcome, empty_reason, refusal,
                                        shown_source)
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.debounce import Debounce, Waits
from tabd.daemon.runtime.doc_events import DocumentEvents
from tabd.daemon.runtime.edit_runs import EditRuns
from tabd.daemon.runtime.events import EventLog, Signal
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.heap import settle_heap
from tabd.daemon.runtime.jobs import Computation, ModelJobs, PromptReuse
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.memory import Memory, Ready, StateId
from tabd.daemon.runtime.report import Reporter
from tabd.daemon.runtime.request import Asked, Request, RequestBuilder
from tabd.daemon.runtime.scheduler import FOREGROUND, Cancelled, Scheduler
from tabd.daemon.runtime.speculator import RecentKeys, Speculator
from tabd.daemon.runtime.stats import Answers
from tabd.daemon.runtime.warmer import Warmer
from tabd.daemon.runtime.workspace import Workspace, context_options
from tabd.predictor.prompt import pairs
from tabd.predictor.types import Backend, Prediction

__all__ = ["Answer", "Asked", "CompletionService", "HUSH_S", "compose", "settle_heap"]

logger = logging.getLogger(__name__)

# After an answer from memory, background jobs wait this long: the client wakes and reads its answer in 0.1-0.5 ms,
# and on 2 busy cores a prefetch that took the free core then delayed that read by up to 1-2 ms (measured at the
# replay client). The prefetch loses 2 ms of the user's think time (hundreds of ms).
HUSH_S = 0.002
PLANNED_KEYS = 1024  # after-accept keys remembered
LOAD_WAIT_S = 60.0  # a request waits this long for the model to load, then answers empty ("loading")
REQUEST_TIMEOUT_S = 30.0  # a loaded model that takes longer than this answers empty rather than never


def workers_for(config: Config) -> int:
    """Model requests at once: a remote engine may batch them; the local one has one model and one KV store."""
    return config.parallel if config.backend == "openai" else 1


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def offered(req: Request, text: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    """The other candidates an invoked request offers besides `text` (Alt+] cycles): distinct, non-blank, at most
    two; an automatic request offers none (one item, as fast as ever)."""
    return offered_at(req.invoked, req.state.after, text, alternatives)


def offered_at(invoked: bool, after: str, text: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    """offered(), for a request `invoked` or not with `after` after its cursor."""
    if not invoked or not text:
        return ()
    out: list[str] = []
    for a in alternatives:
        shown = pairs.shown(a, after)
        if shown.strip() and shown != text and shown not in out:
            out.append(shown)
    return tuple(out[:2])


def ready_answer(requests: RequestBuilder, comp: Computation, prediction: Prediction) -> tuple[StateId, Ready] | None:
    """A finished prefetch's answer as the request at its state would get it from the cache, under that state's
    identity as the LSP layer reads it (TabdServer.ask: 2x the prefix and suffix windows around the cursor); None
    where that request would not build the prefetch's key (another context picked, other settings) or no request
    reads the state so. Same key, same answer: the request's own way to the cache gives exactly this."""
    before_chars, after_chars = requests.config.prefix_chars * 2, requests.config.suffix_chars * 2
    state, context = comp.state, comp.context
    if before_chars <= 0 or len(state.after) > after_chars:
        return None
    before = state.before[-before_chars:]
    if len(before) < before_chars and len(before) != state.offset:
        return None  # cut shorter than the LSP layer reads, and not at the document's start: no request has it
    read = state if len(before) == len(state.before) else DocState(state.offset, before, state.after)
    prompt = requests.prompt(comp.doc, read, context, comp.invoked)
    # the workspace keeps the document's snapshot for this window (Workspace.snapshot), or the key would change
    kept = prompt.window.suffix == context.suffix or prompt.window.start == context.anchor
    if prompt.key != comp.key or not kept:
        return None
    text, others, replaces, alternatives = shown_at(requests, prediction, read.after, comp.invoked)
    return (comp.doc, read.offset, read.before, read.after, comp.invoked), Ready(
        comp.key, text, comp.depth, bool(prediction.text) and not text, others, replaces, alternatives, context,
        requests.model.model_id, prompt.window, prompt.settings, read.after, prediction)


def shown_at(requests: RequestBuilder, prediction: Prediction, after: str,
             invoked: bool) -> tuple[str, tuple[str, ...], int, tuple[tuple[str, int], ...]]:
    """What a request with `after` after its cursor shows of a cached prediction, as its way through the cache makes
    it (_from_memory, _finish): the text, the other candidates offered, and the characters after the cursor each
    replaces (the editor's closers)."""
    text = requests.shown(prediction.text, prediction.confidence, after, invoked)
    others = offered_at(invoked, after, text, prediction.alternatives)
    return text, others, pairs.consumed(text, after), tuple((a, pairs.consumed(a, after)) for a in others)


def ready_for(requests: RequestBuilder, ready: Ready, after: str, invoked: bool) -> Ready:
    """A Ready held for a state that differs from this one only where the key does not read (Memory.ready): what it
    shows made again for this state's text after the cursor (its closers), the key and the rest as they were."""
    text, others, replaces, alternatives = shown_at(requests, ready.prediction, after, invoked)
    return dataclasses.replace(ready, text=text, hidden=bool(ready.prediction.text) and not text, offered=others,
                               replaces=replaces, alternatives=alternatives, after=after)


def _since(t0: float) -> float:
    return (time.monotonic() - t0) * 1000


class CompletionService:
    def __init__(self, *, config: Config, events: EventLog, model: Model, scheduler: Scheduler,
                 requests: RequestBuilder, memory: Memory, computations: Computations, speculator: Speculator,
                 debounce: Debounce, waits: Waits, warmer: Warmer, activity: Listeners, answers: Answers,
                 docs: DocumentEvents,
                 edits: EditRuns, reporter: Reporter, closers: tuple[Callable[[], None], ...] = ()) -> None:
        self.config = config
        self.events = events
        self.model = model
        self.scheduler = scheduler
        self.requests = requests
        self.memory = memory
        self.computations = computations
        self.speculator = speculator
        self.debounce = debounce
        self.waits = waits
        self.warmer = warmer
        self.activity = activity
        self.answers = answers
        self.docs = docs  # what the editor does: the LSP layer tells it there
        self.edits = edits  # the next-edit side's model runs
        self.reporter = reporter
        self._closers = closers
        self._pending_after: list[Callable[[], None]] = []

    # -- one request, one pass ------------------------------------------------------------------

    def answer(self, asked: Asked) -> Answer | Awaitable[Answer]:
        """The answer to what the editor asked: from memory at once (an Answer), or the awaitable of the one model run
        (or run in flight) that answers it. The request is built once and memory is looked in once before any wait."""
        backend = self.model.backend
        if not self.model.loaded or backend is None:
            return self._after_load(asked)
        got = self.answer_ready(asked)
        if got is not None:
            return got
        req = self.requests.build(asked, model_id=backend.model_id)
        answer = self._from_memory(req)
        if answer is None:
            self._after(lambda: self.requests.requested(req))
            return self._run(req)
        # the answer first; what does not change it follows once it is written, prefetches last (hush first)
        self._after(lambda: self._answered_from_memory(req), first=True)
        return answer

    def answer_ready(self, asked: Asked) -> Answer | None:
        """answer()'s first step, alone: the answer memory holds ready under the state's identity (a prefetch's, the
        request after a Tab), out before any key is built, its Request made once it is; None, with nothing done, where
        memory has none ready (the LSP layer asks this first in a Tab's read, before the service hears its edit)."""
        backend = self.model.backend
        if not self.model.loaded or backend is None or not self.memory.enabled:
            return None
        ready = self.memory.ready(asked.doc, asked.offset, asked.before, asked.after, asked.invoked, backend.model_id)
        if ready is None:
            return None
        if ready.after != asked.after:  # held for the state without the editor's closers after the cursor
            ready = ready_for(self.requests, ready, asked.after, asked.invoked)
        latency = _since(asked.arrived)
        got = Answer(str(next(self.requests.ids)), ready.text, shown_source("cache", ready.text, ready.hidden),
                     ready.depth, ready.key, latency, ready.replaces, empty_reason(ready.text, ready.hidden),
                     ready.alternatives)
        self._after(lambda: self._answered_from_memory(self.requests.from_ready(asked, ready, got.id), (
            ready.key, Outcome(ready.text, "cache", ready.depth, cache_ms=latency, hidden=ready.hidden,
                               alternatives=ready.offered), latency)), first=True)  # its Outcome: after the write
        return got

    def _answered_from_memory(self, req: Request, ready: tuple[str, Outcome, float] | None = None) -> None:
        """What an answer from memory sets going once it is out; `ready`: (key, outcome, latency) of one from the
        ready index, whose Request is made only now (from what the index held: its key is the one the long way builds,
        tests/unit/test_ready_index.py), so what _from_memory and _finish set going comes here too."""
        self.scheduler.hush(HUSH_S)  # the prefetches this answer sets going start once the client has read it
        self.waits.end(req.doc, "superseded")  # an older request still waiting out its debounce is of no use now
        self.requests.requested(req)
        if ready is None:
            return
        key, out, latency = ready
        self.memory.used(key)
        self.speculator.used(key)
        self._answered(req, out, latency)
        if out.text:
            self._shown_to_user(req, out)

    async def complete(self, asked: Asked) -> Answer:
        """answer(), awaited (for scripts and tests: `tabd complete`)."""
        got = self.answer(asked)
        return got if isinstance(got, Answer) else await got

    async def ready(self) -> bool:
        return await self.model.ready()

    async def _after_load(self, asked: Asked) -> Answer:
        """A request that came before the model was loaded: it waits for the load (at most LOAD_WAIT_S), then goes on
        as any other; its latency counts the wait."""
        try:  # the load goes on (shielded); this request stops waiting for it
            ready = await asyncio.wait_for(self.model.ready(), LOAD_WAIT_S)
        except asyncio.TimeoutError:
            self.answers.refused(LOADING)
            return refusal(LOADING)
        req = self.requests.build(asked, ready)
        self.requests.requested(req)
        if not ready:
            return self._finish(req, Outcome("", "none", error=self.model.error))
        answer = self._from_memory(req)
        return answer if answer is not None else await self._run(req)

    async def _run(self, req: Request, waited: float = 0.0, why: str = "") -> Answer:
        """What memory did not have: the run in flight for this key, or (after the debounce) one model run."""
        comp = self.memory.running(req.key)
        if comp is not None and comp.job is not None:
            self.waits.end(req.doc, "superseded")
            self.scheduler.promote(comp.job, FOREGROUND)
            return await self._await(req, comp, "inflight", waited, why)
        if not waited:
            self.computations.supersede(req.doc, req.key)
            wait = self.debounce.wait_for(req.doc, req.invoked, req.after_accept)
            left = wait.ms - _since(req.t0)  # from the request's arrival: a wait for the model load counts
            if left > 0:  # only a request that needs the model waits, and a newer keystroke cuts the wait short
                return await self._debounced(req, left, wait.ms, wait.why)
        comp = self.computations.request(Computation(req.key, req.doc, req.state, req.window, req.settings, 0,
                                                     context=req.context))
        return await self._await(req, comp, "model", waited, why)

    async def _debounced(self, req: Request, left: float, ms: float, why: str) -> Answer:
        """Wait out what is `left` of the debounce `ms`: an empty answer when a newer keystroke cut it; else memory
        again (a prefetch may have answered this state meanwhile), then the model."""
        started = time.monotonic()
        try:
            cut = await self.waits.wait(req.doc, req.window, left / 1000)
        except asyncio.CancelledError:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client", debounce_ms=round(_since(started), 3))
            self.activity.requested()  # it ends unanswered: the user is at work all the same
            raise
        if cut:
            self.answers.debounce["superseded"] += 1
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=cut, debounce_ms=round(_since(started), 3))
            return self._finish(req, Outcome("", "none", debounce_ms=_since(started), debounce_why=why,
                                             cut=DEBOUNCED if cut == "stale" else SUPERSEDED))
        answer = self._from_memory(req, ms)
        return answer if answer is not None else await self._run(req, ms, why)

    def _from_memory(self, req: Request, waited: float = 0.0) -> Answer | None:
        if not self.memory.enabled:
            return None
        # a remote engine's automatic answer ends where the gate cut it; an invoked request shows the best guess
        # whole, so only an answer computed for its own key serves it
        own_key_only = req.invoked and self.requests.cuts_at_gate()
        recalled = self.memory.recall(req.key, req.window, req.doc, req.state, own_key_only)
        if recalled is None:
            return None
        self._after(lambda: self.speculator.used(recalled.key))
        # the cache keeps a suggestion whole: each request gates it by its own threshold
        text = req.shown(recalled.text, recalled.confidence) if recalled.source == "cache" else recalled.text
        return self._serve(req, Outcome(text, recalled.source, recalled.depth, cache_ms=_since(req.t0),
                                        from_key=recalled.key if recalled.source == "typed" else "",
                                        hidden=bool(recalled.text) and not text, debounce_ms=waited,
                                        waited_out=waited > 0, alternatives=offered(req, text, recalled.alternatives)))

    async def _await(self, req: Request, comp: Computation, source: str, waited: float = 0.0, why: str = "") -> Answer:
        job = comp.job
        assert job is not None  # started
        comp.waiters += 1
        future: Future[Prediction] = job.future
        result = asyncio.wrap_future(future)
        result.add_done_callback(_retrieve)  # a waiter that left must not leave an unread exception behind
        try:  # wait_for on a future runs no task of its own: nothing between this answer and its write (see _after)
            prediction = await asyncio.wait_for(asyncio.shield(result), REQUEST_TIMEOUT_S)
        except asyncio.TimeoutError:
            comp.waiters -= 1
            if comp.waiters == 0 and not comp.prefetch:
                self.computations.cancel(comp, "timeout")
            logger.warning("no answer within %.0f s; answering empty", REQUEST_TIMEOUT_S)
            message = f"no answer within {REQUEST_TIMEOUT_S:.0f} s"
            self.events.emit("error", where="timeout", doc=req.doc, message=message)
            return self._finish(req, Outcome("", "none", error=message, debounce_ms=waited, waited_out=waited > 0))
        except Cancelled:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=comp.cancel_reason or "shutdown")
            return self._finish(req, Outcome("", "none", debounce_ms=waited, debounce_why=why, cut=SUPERSEDED,
                                             waited_out=waited > 0))
        except asyncio.CancelledError:
            comp.waiters -= 1
            if comp.waiters == 0 and not comp.prefetch:
                self.computations.cancel(comp, "client")
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client")
            if waited:  # it ends unanswered: its wait is counted here, not with an answer (_answered)
                self.answers.waited(waited)
            self.activity.requested()
            raise
        except Exception as exc:
            self.events.emit("error", where="model", message=f"{type(exc).__name__}: {exc}")
            return self._finish(req, Outcome("", "none", error=str(exc), debounce_ms=waited, waited_out=waited > 0))
        comp.waiters -= 1
        queue_ms = (job.started_at - job.queued_at) * 1000 if job.started_at else 0.0
        depth = comp.depth if source == "inflight" else 0
        text = req.shown(prediction.text, prediction.confidence)
        return self._serve(req, Outcome(text, source, depth, prediction, queue_ms, hidden=bool(prediction.text) and not text,
                                        debounce_ms=waited, debounce_why=why, waited_out=waited > 0,
                                        alternatives=offered(req, text, prediction.alternatives)))

    def _serve(self, req: Request, out: Outcome) -> Answer:
        answer = self._finish(req, out)
        if out.text:
            self._after(lambda: self._shown_to_user(req, out))
        return answer

    def _shown_to_user(self, req: Request, out: Outcome) -> None:
        """What a suggestion on screen sets going, once its answer is out: type-through, accept tracking, speculation."""
        self.memory.shown(req.window, out.text, req.key, out.depth, req.doc, req.state)
        self.speculator.shown(req, out.text, typed=out.source == "typed")

    def _finish(self, req: Request, out: Outcome) -> Answer:
        latency = _since(req.t0)
        # after the answer is out: the counters and the log line cost the user nothing
        self._after(lambda: self._answered(req, out, latency))
        alternatives = tuple((a, pairs.consumed(a, req.state.after)) for a in out.alternatives)
        return Answer(req.id, out.text, out.shown_source, out.depth, req.key, latency, pairs.consumed(out.text, req.state.after),
                      out.reason, alternatives)

    def _answered(self, req: Request, out: Outcome, latency: float) -> None:
        """What an answer tells the collaborators that count, learn or log, once it is written: the user is at work
        (the hand-over holds off: told as the request ends, answered or cancelled, not on its way to the model)."""
        self.answers.answered(out.shown_source, latency, req.after_accept, out.depth, out.debounce_ms, out.reason,
                              out.source)
        if out.waited_out:
            self.answers.waited(out.debounce_ms)
        self.activity.requested()
        self.activity.shown(bool(out.text))  # while a suggestion shows, a Tab may come (the hand-over holds off)
        computed = out.computed
        if computed is not None:
            self.answers.served(computed)
            self.debounce.model_answered(latency - out.debounce_ms)
            # a remote engine's load shows in the wait for its first token (its queue, others' batches); the whole
            # latency also counts how long the suggestion is, which says nothing of the others
            self.speculator.engine.observe(computed.first_token_ms or latency - out.debounce_ms)
            self.activity.answered()
        self.events.emit("completion", **self.reporter.completion(req, out, latency))

    def refused(self, reason: str) -> Answer:
        """The empty answer to a request the service never sees (an excluded or disabled document): tabd/stats' last
        answer says why."""
        self.answers.refused(reason)
        return refusal(reason)

    # -- after the answer is out ------------------------------------------------------------------

    def _after(self, fn: Callable[[], None], first: bool = False) -> None:
        """Run fn once the answer is written, before the loop reads the client's next message (its Tab, which must
        not overtake what fn sets going): at the next turn where the answer was written at once (from memory), one
        turn later in a task (an awaited answer, written by the task's done callback). Either way fn is queued before
        the turn that reads what the client sends next. `first`: before what is pending (a hush before the prefetches
        it holds back)."""
        if first:
            self._pending_after.insert(0, fn)
        else:
            self._pending_after.append(fn)
        if len(self._pending_after) > 1:
            return  # the drain is scheduled already
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain call): now
            self.run_after()
            return
        if asyncio.current_task() is None:  # a message handled in a plain callback: its answer is written already
            loop.call_soon(self.run_after)
        else:  # in a task: the answer goes out in its done callback, which this turn queues; one turn more
            loop.call_soon(loop.call_soon, self.run_after)

    def run_after(self) -> None:
        """What the answers given so far set going (type-through, accept tracking, planning, log lines), now."""
        pending, self._pending_after = self._pending_after, []
        for fn in pending:
            try:
                fn()
            except Exception:  # one failed step must not drop the others
                logger.exception("after an answer")

    # -- the report and the end ---------------------------------------------------------------------

    def stats_dict(self) -> dict[str, Any]:
        """The report, counting every answer given so far (the counts an answer makes follow its write)."""
        self.run_after()
        return self.reporter.stats_dict()

    def close(self) -> None:
        for close in self._closers:
            close()


def compose(config: Config, backend_factory: Callable[[Config], Backend] | None = None, events: EventLog | None = None,
            *, scheduler: Scheduler | None = None, model: Model | None = None,
            handover: HandOver | None = None) -> CompletionService:
    """The service and its default collaborators: over a backend made by `backend_factory`, or over a `scheduler` and
    `model` built elsewhere (the model runs its jobs on that scheduler, which holds background jobs back as its
    builder said; the hand-over starts from the model's on_loaded, or stays off)."""
    events = events or EventLog()
    if model is None or scheduler is None:
        assert backend_factory is not None, "compose needs a backend factory or a model"

        def holds_background() -> bool:  # an engine that orders requests by priority gets prefetches beside the
            backend = loaded.backend       # user's requests; any other, after them
            return not (backend is not None and backend.orders_by_priority)

        scheduler = Scheduler(workers=workers_for(config), holds_background=holds_background)
        handover = HandOver(scheduler, events)
        loaded = model = Model(config, backend_factory, scheduler, events, on_loaded=handover.start)
    handover = handover or HandOver(scheduler, events)
    activity = Listeners(handover)
    debounce, waits = Debounce(config.debounce_ms), Waits()
    context_changed: Signal[[str, Any, Any, Any]] = Signal()
    workspace = Workspace(context_options(config), config.prefix_chars, config.suffix_chars, context_changed)
    planned = RecentKeys(PLANNED_KEYS)
    requests = RequestBuilder(config, model, workspace, planned.has)
    memory = Memory(config, workspace.snapshots)
    jobs = ModelJobs(scheduler, model, events, follow_engine=config.backend == "openai" and config.parallel == 1)
    computations = Computations(jobs, memory, events)
    computations.prefetched.subscribe(debounce.prefetched)  # the request after a Tab it stands in for: a model call

    def hold_ready(comp: Computation, prediction: Prediction) -> None:  # the Tab's request finds it without a key
        found = ready_answer(requests, comp, prediction)
        if found is not None:
            memory.hold_ready(*found)

    computations.prefetched.subscribe(hold_ready)
    speculator = Speculator(config, requests, memory, computations, events, workspace.current, planned)
    warm_reuse = PromptReuse()
    warmer = Warmer(jobs, events, workspace.stats.warmups, warm_reuse.reused,
                    lambda doc: len(workspace.current(doc).chunks))
    closed: Signal[[str]] = Signal()
    for hears in (speculator.closed, memory.closed, computations.closed, waits.closed, debounce.closed,
                  requests.closed, workspace.closed):
        closed.subscribe(hears)
    docs = DocumentEvents(config, model, requests, memory, computations, speculator, warmer, debounce, waits,
                          workspace, activity, closed, context_changed)
    answers = Answers()
    reporter = Reporter(config, answers, model, scheduler, memory, computations, speculator, debounce, waits,
                        workspace, handover, warm_reuse)
    return CompletionService(config=config, events=events, model=model, scheduler=scheduler, requests=requests,
                             memory=memory, computations=computations, speculator=speculator, debounce=debounce,
                             waits=waits, warmer=warmer, activity=activity, answers=answers, docs=docs,
                             edits=EditRuns(config, model, scheduler, requests), reporter=reporter,
                             closers=(workspace.close, activity.close, scheduler.stop))
