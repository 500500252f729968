"""The completion service: how a keystroke travels from a document state to a suggestion.

memory (cache -> type-through -> in-flight) -> debounce -> model run; then the
speculator plans the states after an accept as background prefetches. It speaks
plain dataclasses (DocState in, Answer out): the LSP layer converts, the
predictor computes. The service holds the order of those steps; each step is a
collaborator with one job, built once here (or given to `compose`):

  requests     RequestBuilder  the Request for a state (window, settings, context, key, gating)
  memory       Memory          cache, type-through and in-flight runs
  computations Computations    model runs by key (jobs.py: one lifecycle with the warm-ups)
  speculator   Speculator      what to compute after an answer; what accepts teach
  warmer       Warmer          KV warm-ups when a document's context changes
  activity     Listeners       who hears what the user does (the hand-over)
  reporter     Reporter        tabd/stats and the completion log line, reading the rest
"""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from typing import Any, Callable

from tabd.predictor.prompt import pairs
from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import Snapshot, TextSource
from tabd.daemon.context.languages import block_openers, comment_of
from tabd.daemon.edits.model_source import FormatWriter, Writer
from tabd.daemon.runtime.activity import Listeners
from tabd.daemon.runtime.answer import DEBOUNCED, SUPERSEDED, Answer, Outcome
from tabd.daemon.runtime.computation import Computation
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.debounce import Debounce, Waits
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.heap import settle_heap
from tabd.daemon.runtime.jobs import ModelJobs
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.report import Reporter
from tabd.daemon.runtime.request import Request, RequestBuilder
from tabd.daemon.runtime.scheduler import FOREGROUND, Cancelled, Scheduler
from tabd.daemon.runtime.speculator import RecentKeys, Speculator
from tabd.daemon.runtime.stats import Stats
from tabd.daemon.runtime.warmer import Warmer
from tabd.daemon.runtime.workspace import Workspace, context_options
from tabd.predictor.prompt.nes_formats import TABD, NesFormat, format_named
from tabd.predictor.types import Backend, GenSettings, Prediction

__all__ = ["Answer", "CompletionService", "HUSH_S", "settle_heap"]

logger = logging.getLogger(__name__)

# After an answer from memory, background jobs wait this long: the client wakes and reads its answer in 0.1-0.5 ms,
# and on 2 busy cores a prefetch that took the free core then delayed that read by up to 1-2 ms (measured at the
# replay client). The prefetch loses 2 ms of the user's think time (hundreds of ms).
HUSH_S = 0.002
PLANNED_KEYS = 1024  # after-accept keys remembered


def workers_for(config: Config) -> int:
    """Model requests at once: a remote engine may batch them; the local one has one model and one KV store."""
    return config.parallel if config.backend == "openai" else 1


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def spelled_probability(pred: Prediction, text: str) -> float:
    """The joint probability of the model's tokens up to where its suggestion spells `text` (0 where it departs)."""
    wrote = pred.text
    if not wrote or not (wrote.startswith(text) or text.startswith(wrote)):
        return 0.0
    p = 1.0
    for end, prob in pred.confidence:
        p *= prob
        if end >= len(text):
            break
    return p


def offered(req: Request, text: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    """The other candidates an invoked request offers besides `text` (Alt+] cycles): distinct, non-blank, at most
    two; an automatic request offers none (one item, as fast as ever)."""
    if not req.invoked or not text:
        return ()
    out: list[str] = []
    for a in alternatives:
        shown = pairs.shown(a, req.state.after)
        if shown.strip() and shown != text and shown not in out:
            out.append(shown)
    return tuple(out[:2])


def _since(t0: float) -> float:
    return (time.monotonic() - t0) * 1000


class CompletionService:
    def __init__(self, config: Config, backend_factory: Callable[[Config], Backend], events: EventLog | None = None) -> None:
        events = events or EventLog()
        scheduler = Scheduler(workers=workers_for(config))
        handover = HandOver(scheduler, events)
        model = Model(config, backend_factory, scheduler, events, on_loaded=handover.start)
        self._compose(config, events, scheduler, model, handover)

    @classmethod
    def compose(cls, config: Config, events: EventLog, scheduler: Scheduler, model: Model,
                handover: HandOver) -> CompletionService:
        """A service over a scheduler and a model built elsewhere (the model runs its jobs on that scheduler; the
        hand-over starts from the model's on_loaded, or stays off)."""
        service = cls.__new__(cls)
        service._compose(config, events, scheduler, model, handover)
        return service

    def _compose(self, config: Config, events: EventLog, scheduler: Scheduler, model: Model, handover: HandOver) -> None:
        self.config = config
        self.events = events
        self.scheduler = scheduler
        # an engine that orders requests by priority gets prefetches beside the user's requests; any other, after them
        scheduler.holds_background = lambda: not (model.backend is not None and model.backend.orders_by_priority)
        self.model = model
        self.handover = handover
        self.activity = Listeners(handover)
        self.stats = Stats()
        self.debounce = Debounce(config.debounce_ms)
        self.waits = Waits()
        self.workspace = Workspace(context_options(config), config.prefix_chars, config.suffix_chars,
                                   self._context_changed)
        planned = RecentKeys(PLANNED_KEYS)
        self.requests = RequestBuilder(config, model, self.workspace, planned.__contains__)
        self.memory = Memory(config)
        jobs = ModelJobs(scheduler, model, events, follow_engine=config.backend == "openai" and config.parallel == 1)
        self.computations = Computations(jobs, self.memory, self.stats, events)
        self.speculator = Speculator(config, self.requests, self.memory, self.computations, self.stats, events,
                                     self.workspace.current, planned)
        self.computations.prefetched = self._prefetched
        self.warmer = Warmer(jobs, events, self.workspace.stats.warmups, self.stats.reused,
                             lambda doc: len(self.workspace.current(doc).chunks))
        self.reporter = Reporter(config, self.stats, model, scheduler, self.memory, self.speculator, self.debounce,
                                 self.waits, self.workspace, handover)
        self._pending_after: list[Callable[[], None]] = []
        self._plain_refused = False  # --edit-format's warning, said once

    # -- the model --------------------------------------------------------------------------

    @property
    def backend(self) -> Backend | None:
        return self.model.backend

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def load_error(self) -> str | None:
        return self.model.error

    async def ready(self) -> bool:
        return await self.model.ready()

    async def score(self, doc: str, prefix: str, suffix: str, text: str, background: bool) -> float:
        """The model's probability of writing `text` at a place other than the cursor (next-edit suggestions'
        gate): its greedy suggestion there, between `prefix` and `suffix`, as far as it spells `text`; 0 where it
        writes something else or cannot run."""
        if not await self.model.ready() or self.model.backend is None:
            return 0.0
        backend = self.model.backend
        state = DocState(len(prefix), prefix[-2 * self.config.prefix_chars:], suffix[:2 * self.config.suffix_chars])
        window, settings = self.requests.window_of(state), self.requests.settings_for(state)

        def run(should_stop: Callable[[], bool]) -> Prediction:
            return backend.predict(window.prefix, window.suffix, settings, should_stop, slot_id=f"{doc}#edit")

        job = self.scheduler.submit(run, 1 if background else FOREGROUND, "edit-score")
        try:
            pred: Prediction = await asyncio.wrap_future(job.future)
        except (Cancelled, Exception) as exc:  # a failed score holds the edit back: never shown on an error
            logger.info("edit score failed: %s", exc)
            return 0.0
        return spelled_probability(pred, text)

    def edit_writer(self) -> Writer:
        """The model as a next-edit writer (daemon/edits/model_source.py): in tabd's own prompt format, or in the one
        --edit-format names (Sweep's, Zeta's), which the model source then builds its prompts in."""
        fmt = format_named(self.config.edit_format)
        return self.write_edit if fmt is TABD else FormatWriter(fmt, self.write_edit)

    async def write_edit(self, doc: str, prompt: str, budget: int, background: bool,
                         fmt: NesFormat = TABD) -> tuple[str, tuple[tuple[int, float], ...]] | None:
        """The model's answer to a next-edit prompt (predictor/prompt/edit_prompt.py, or `fmt`'s) as written, with its
        tokens' probabilities; None where it cannot run. Its own slot: the edit prompt's keys and values are kept for
        the next one (a chain's prompts share their head). A format of another model's goes to the engine as it is
        (a plain completion, no FIM suffix) with its stop strings; an answer that used the whole budget was cut
        before its end, and is none."""
        if not await self.model.ready() or self.model.backend is None:
            return None
        backend = self.model.backend
        if not backend.writes_edits:
            return None
        if fmt.plain and not backend.plain_prompts:
            if not self._plain_refused:
                self._plain_refused = True
                logger.warning("--edit-format %s needs --backend openai (an engine serving that model); the model "
                               "writes no edits here", fmt.name)
            return None
        settings = GenSettings(max_new_tokens=budget, lookup_min_p=0.0, known_names=False, raw=True, plain=fmt.plain,
                               stop=fmt.stops)

        def run(should_stop: Callable[[], bool]) -> Prediction:
            return backend.predict(prompt, "", settings, should_stop, slot_id=f"{doc}#nes", priority=int(background))

        job = self.scheduler.submit(run, 1 if background else FOREGROUND, "edit-write")
        try:
            pred: Prediction = await asyncio.wrap_future(job.future)
        except (Cancelled, Exception) as exc:  # no answer: no edit, never an error shown for a suggestion
            logger.info("edit prompt failed: %s", exc)
            return None
        if fmt.stops and pred.decode_tokens >= budget:
            return None  # stopped by the budget, not by the format's stop: the window it wrote is not whole
        return pred.text, pred.confidence

    # -- requests -----------------------------------------------------------------------------

    def lookup(self, doc: str, version: int, state: DocState, invoked: bool = False) -> Answer | None:
        """The answer from memory (cache, type-through) at once, with no await; None when it needs more."""
        self.activity.requested()  # a request answered from memory is the user at work too
        if not self.memory.enabled or not self.model.loaded or self.model.backend is None:
            return None
        req = self.requests.hold(doc, version, state, invoked)  # complete() takes it if memory has no answer
        answer = self._from_memory(req)
        if answer is not None:
            self.requests.release(doc)
            self.waits.end(doc, "superseded")  # an older request still waiting out its debounce is of no use now
            self.scheduler.hush(HUSH_S)  # the prefetches this answer sets going start once the client has read it
        return answer

    async def complete(self, doc: str, version: int, state: DocState, invoked: bool = False,
                       arrived: float | None = None) -> Answer:
        """The answer for a state; `arrived`: when the request reached the server (monotonic), if it waited before."""
        t0 = time.monotonic()
        self.activity.requested()
        ready = await self.ready()
        req = self.requests.take(doc, version, state, invoked, ready, t0)  # its latency counts a wait for the load
        if not ready:
            return self._finish(req, Outcome("", "none", error=self.load_error))

        answer = await self._reused(req)
        if answer is not None:
            self.waits.end(doc, "superseded")
            return answer
        self.computations.supersede(doc, req.key)
        wait = self.debounce.wait_for(doc, invoked, req.after_accept)
        left = wait.ms - _since(arrived or t0)  # from the request's arrival: a wait for the model load counts
        if left > 0:  # only a request that needs the model waits, and a newer keystroke cuts the wait short
            answer = await self._debounced(req, left, wait.ms, wait.why)
            if answer is not None:
                return answer
        self.warmer.cancel(doc)
        comp = self.computations.request(Computation(req.key, doc, state, req.window, req.settings, 0,
                                                     context=req.context))
        return await self._await(req, comp, "model", wait.ms if left > 0 else 0.0, wait.why if left > 0 else "")

    def _from_memory(self, req: Request, waited: float = 0.0) -> Answer | None:
        # a remote engine's automatic answer ends where the gate cut it; an invoked request shows the best guess
        # whole, so only an answer computed for its own key serves it
        own_key_only = req.invoked and self.requests.cuts_at_gate()
        recalled = self.memory.recall(req.key, req.window, req.doc, req.state, own_key_only)
        if recalled is None:
            return None
        self.speculator.used(recalled.key)
        # the cache keeps a suggestion whole: each request gates it by its own threshold
        text = req.shown(recalled.text, recalled.confidence) if recalled.source == "cache" else recalled.text
        return self._serve(req, Outcome(text, recalled.source, recalled.depth, cache_ms=_since(req.t0),
                                        from_key=recalled.key if recalled.source == "typed" else "",
                                        hidden=bool(recalled.text) and not text, debounce_ms=waited,
                                        alternatives=offered(req, text, recalled.alternatives)))

    async def _reused(self, req: Request, waited: float = 0.0) -> Answer | None:
        """The answer from memory or from the computation in flight for this very state; None when neither has it."""
        answer = self._from_memory(req, waited)
        if answer is not None:
            return answer
        comp = self.memory.running(req.key)
        if comp is None or comp.job is None:
            return None
        self.scheduler.promote(comp.job, FOREGROUND)
        return await self._await(req, comp, "inflight", waited)

    async def _debounced(self, req: Request, left: float, ms: float, why: str) -> Answer | None:
        """Wait out what is `left` of the debounce `ms`: None to go on to the model, else the answer (empty when
        cut, or from memory)."""
        started = time.monotonic()
        try:
            cut = await self.waits.wait(req.doc, req.window, left / 1000)
        except asyncio.CancelledError:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client", debounce_ms=round(_since(started), 3))
            raise
        if cut:
            self.stats.debounce["superseded"] += 1
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=cut, debounce_ms=round(_since(started), 3))
            return self._finish(req, Outcome("", "none", debounce_ms=_since(started), debounce_why=why,
                                             cut=DEBOUNCED if cut == "stale" else SUPERSEDED))
        self.stats.waited(ms)
        return await self._reused(req, ms)  # a prefetch may have answered, or begun, this state meanwhile

    async def _await(self, req: Request, comp: Computation, source: str, waited: float = 0.0, why: str = "") -> Answer:
        job = comp.job
        assert job is not None  # started
        comp.waiters += 1
        future: Future[Prediction] = job.future
        result = asyncio.wrap_future(future)
        result.add_done_callback(_retrieve)  # a waiter that left must not leave an unread exception behind
        try:
            prediction = await asyncio.shield(result)
        except Cancelled:
            self.events.emit("cancel", id=req.id, doc=req.doc, reason=comp.cancel_reason or "shutdown")
            return self._finish(req, Outcome("", "none", debounce_ms=waited, debounce_why=why, cut=SUPERSEDED))
        except asyncio.CancelledError:
            comp.waiters -= 1
            if comp.waiters == 0 and not comp.prefetch:
                self.computations.cancel(comp, "client")
            self.events.emit("cancel", id=req.id, doc=req.doc, reason="client")
            raise
        except Exception as exc:
            self.events.emit("error", where="model", message=f"{type(exc).__name__}: {exc}")
            return self._finish(req, Outcome("", "none", error=str(exc)))
        comp.waiters -= 1
        queue_ms = (job.started_at - job.queued_at) * 1000 if job.started_at else 0.0
        depth = comp.depth if source == "inflight" else 0
        text = req.shown(prediction.text, prediction.confidence)
        return self._serve(req, Outcome(text, source, depth, prediction, queue_ms, hidden=bool(prediction.text) and not text,
                                        debounce_ms=waited, debounce_why=why,
                                        alternatives=offered(req, text, prediction.alternatives)))

    def _prefetched(self, comp: Computation, prediction: Prediction) -> None:
        """A prefetch finished: its call says how long the model takes (debounce.py), as the request after a Tab it
        stands in for would have, and how early a shared engine's Tab prefetch must start (engine_load.pause_s);
        then speculation plans from it."""
        took = prediction.prefill_ms + prediction.decode_ms
        self.debounce.model_answered(took)
        self.speculator.engine.prefetched(took / 1000)
        self.speculator.prefetched_answer(comp, prediction)

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
        reason = out.reason
        self.stats.answered(out.shown_source, latency, req.after_accept, out.depth, out.debounce_ms, reason, out.source)
        self.activity.shown(bool(out.text))  # while a suggestion shows, a Tab may come (the hand-over holds off)
        computed = out.computed
        if computed is not None:
            self.stats.reused("request", computed)
            self.stats.served(computed)
            self.debounce.model_answered(latency - out.debounce_ms)
            # a remote engine's load shows in the wait for its first token (its queue, others' batches); the whole
            # latency also counts how long the suggestion is, which says nothing of the others
            self.speculator.engine.observe(computed.first_token_ms or latency - out.debounce_ms)
            self.activity.answered()
        # after the answer is out: the log line costs the user nothing
        self._after(lambda: self._log("completion", self.reporter.completion(req, out, latency)))
        alternatives = tuple((a, pairs.consumed(a, req.state.after)) for a in out.alternatives)
        return Answer(req.id, out.text, out.shown_source, out.depth, req.key, latency, pairs.consumed(out.text, req.state.after),
                      reason, alternatives)

    def refused(self, reason: str) -> None:
        """A request the service never saw (an excluded or disabled document): tabd/stats' last answer says why."""
        self.stats.refused(reason)

    def _log(self, event: str, fields: dict[str, Any]) -> None:
        self.events.emit(event, **fields)

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

    # -- what the user does -----------------------------------------------------------------------

    def accept(self, answer_id: str, chars: int | None = None, partial: bool = False,
               alternative: str | None = None) -> bool:
        """`tabd.accept`: whether the suggestion was one shown (counted once, with its edit if that came first);
        `alternative`: the text of another of its items, taken instead."""
        return self.speculator.accept(answer_id, chars, partial, alternative)

    def dismiss(self, answer_id: str) -> bool:
        self.activity.shown(False)
        return self.speculator.dismiss(answer_id)

    def prefetch_at(self, doc: str, state: DocState, now: DocState) -> None:
        """The completion at `state`, which an accept elsewhere than at the cursor reaches (a next edit applied),
        computed in the background; `now`: the user's state."""
        if self.model.loaded and self.model.backend is not None and self.memory.enabled:
            self.speculator.prefetch_state(doc, state, self.requests.window_of(now))

    def document_opened(self, doc: str, path: str, text: str, language: str = "") -> None:
        """A document the service may read (`language`: the editor's languageId; "" or unknown: by the path)."""
        self.requests.opened(doc, block_openers(language, path))
        self.workspace.opened(doc, path, text, comment_of(language, path), language)

    def document_edited(self, doc: str, offset: int, removed: int, inserted: str) -> None:
        """One didChange edit (offset in the text before it, `removed` characters replaced by `inserted`): an accept
        when it inserts the suggestion shown there; the suggestion shown stays across an edit elsewhere."""
        self.speculator.edited(doc, offset, removed, inserted)
        self.memory.rebase.edited(doc, offset, removed, inserted)

    def document_changed(self, doc: str, state: DocState | None, text: TextSource | None = None,
                         offset: int | None = None) -> None:
        """The document's new state (None: it is gone): cancel what it can no longer use; `text` (or how to read it)
        and the cursor `offset` update its workspace context."""
        now = self.requests.window_of(state) if state is not None else None
        if now is not None:
            self.debounce.edited(doc, time.monotonic())
        self.waits.end(doc, "closed" if now is None else "stale", unless_window=now)  # a newer keystroke: no wait goes on
        self.computations.cancel_unreachable(doc, now)
        if text is not None:
            self.workspace.changed(doc, text, offset, state)

    def document_closed(self, doc: str) -> None:
        self.speculator.closed(doc)
        self.memory.rebase.closed(doc)
        self.document_changed(doc, None)
        self.debounce.closed(doc)
        self.requests.release(doc)
        self.requests.closed(doc)
        self.workspace.closed(doc)

    def focus(self, doc: str, state: DocState) -> Snapshot:
        """The user moved here (tabd/focus): pick the context now and warm the prompt up; the requests of other
        documents that a newer request pre-empted stop instead of resuming."""
        self.computations.elsewhere(doc)
        return self.workspace.focus(doc, state)

    def context_of(self, doc: str) -> Snapshot:
        """The workspace context a document's prompts start with now (tabd/context)."""
        return self.workspace.current(doc)

    def _context_changed(self, doc: str, state: DocState, window: Window, context: Snapshot) -> None:
        """A new context for `doc`, or a move there: prefill its prompt in the background (foreground pre-empts it),
        or, with its suggestion on screen, prefetch the suggestion's after-accept states under the new context."""
        if self.model.backend is None:
            return
        self.computations.cancel_prefetches(doc, unless_digest=context.digest)
        if not self.speculator.context_changed(doc, window, state, context) and self.config.warmup:
            self.warmer.submit(doc, window, self.requests.settings_for(state, doc), context)

    # -- the report and the end ---------------------------------------------------------------------

    def stats_dict(self) -> dict[str, Any]:
        return self.reporter.stats_dict()

    def close(self) -> None:
        self.workspace.close()
        self.activity.close()
        self.scheduler.stop()
