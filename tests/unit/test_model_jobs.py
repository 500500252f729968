"""One lifecycle for every model run (daemon/runtime/jobs.py): how a run is counted and reported, whatever its kind,
and the runs that go through it: warm-ups (warmer.py), the whole window's prefill after a short-window answer, the
model load (loaded_model.py) and the hand-over's swap (handover.py)."""
from __future__ import annotations

import asyncio
import threading

from support.fakes import FakeBackend
from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import EMPTY, Chunk, Snapshot
from tabd.daemon.runtime.jobs import Computation
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime import handover as handover_module
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.jobs import ModelCall, ModelJobs, Tally, queue
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.scheduler import FOREGROUND, Scheduler
from tabd.daemon.runtime.warmer import Warmer
from tabd.predictor.types import GenSettings, Prediction, Query

WINDOW = Window(0, "x = ", "\n")
CONTEXT = Snapshot(chunks=(Chunk("d2", "lib.py", 0, "def helper(): ...", "open"),), digest="abc",
                   sources=(("lib.py", "def helper(): ...\n"),))


async def _jobs(backend: FakeBackend) -> tuple[ModelJobs, Scheduler, EventLog]:
    scheduler, events = Scheduler(), EventLog()
    model = Model(Config(), lambda c: backend, scheduler, events)
    assert await model.ready()
    return ModelJobs(scheduler, model), scheduler, events


def _ends() -> tuple[list, asyncio.Event, callable]:
    ends: list = []
    done = asyncio.Event()
    loop_thread = threading.get_ident()

    def ended(job, p):
        ends.append((p, threading.get_ident() == loop_thread))
        done.set()
    return ends, done, ended


async def test_a_finished_run_is_counted_and_reported_on_the_loop_with_its_prediction():
    backend = FakeBackend(text="done()")
    jobs, scheduler, _ = await _jobs(backend)
    try:
        tally = Tally()
        ends, done, ended = _ends()
        jobs.start(ModelCall(WINDOW, GenSettings(), "d1", CONTEXT), FOREGROUND, "request", tally, ended)
        assert tally.started == 1
        await asyncio.wait_for(done.wait(), 5)
        assert ends == [(Prediction("done()"), True)]
        assert (tally.finished, tally.cancelled, tally.preempted) == (1, 0, 0)
        # the context goes to the backend as chunks: the prompt's, then the texts to copy from
        assert [(c.path, c.lookup_only) for c in backend.contexts[-1]] == [("lib.py", False), ("lib.py", True)]
    finally:
        scheduler.stop()


async def test_a_run_without_context_still_passes_the_context_argument():
    backend = FakeBackend()
    jobs, scheduler, _ = await _jobs(backend)
    try:
        ends, done, ended = _ends()
        jobs.start(ModelCall(WINDOW, GenSettings(), "d1", EMPTY), FOREGROUND, "request", Tally(), ended)
        await asyncio.wait_for(done.wait(), 5)
        assert backend.contexts == [[]]
    finally:
        scheduler.stop()


async def test_a_cancelled_or_failed_run_ends_with_none_and_counts_cancelled():
    for backend in (FakeBackend(delay=5.0), FakeBackend(fail=True)):
        jobs, scheduler, _ = await _jobs(backend)
        try:
            tally = Tally()
            ends, done, ended = _ends()
            job = jobs.start(ModelCall(WINDOW, GenSettings(), "d1"), 1, "prefetch", tally, ended)
            if backend.delay:
                await asyncio.to_thread(backend.started.wait, 5)
                jobs.cancel(job)
            await asyncio.wait_for(done.wait(), 5)
            assert ends == [(None, True)]
            assert (tally.started, tally.finished, tally.cancelled, tally.preempted) == (1, 0, 1, 0)
        finally:
            scheduler.stop()


async def test_a_background_run_a_request_preempts_is_counted_preempted_then_finishes():
    backend = FakeBackend(delay=0.3)
    jobs, scheduler, _ = await _jobs(backend)
    try:
        background, requests = Tally(), Tally()
        told: list[bool] = []
        ends, done, ended = _ends()
        jobs.start(ModelCall(WINDOW, GenSettings(), "d1#all"), 1, "prefetch", background, ended,
                   preempted=lambda: told.append(True))
        await asyncio.to_thread(backend.started.wait, 5)
        _, request_done, request_ended = _ends()
        jobs.start(ModelCall(WINDOW, GenSettings(), "d1"), FOREGROUND, "request", requests, request_ended)
        await asyncio.wait_for(request_done.wait(), 5)
        await asyncio.wait_for(done.wait(), 5)  # requeued, then run to its end
        assert told == [True] and (background.preempted, background.finished, background.cancelled) == (1, 1, 0)
        assert (requests.finished, requests.preempted) == (1, 0)
        assert backend.interrupted == 1
    finally:
        scheduler.stop()


async def test_a_computation_goes_to_the_backend_as_it_is_in_its_branchs_slot():
    backend = FakeBackend()
    jobs, scheduler, _ = await _jobs(backend)
    try:
        comp = Computation("k1", "d1", DocState(4, "x = ", "\n"), WINDOW, GenSettings(), 1, context=CONTEXT,
                           kinds=("all", "word"))
        ends, done, ended = _ends()
        jobs.start(comp, 1, "prefetch", Tally(), ended)
        await asyncio.wait_for(done.wait(), 5)
        assert backend.calls == [(WINDOW.prefix, WINDOW.suffix, "d1#all.word")]
        assert [c.path for c in backend.contexts[-1]] == ["lib.py", "lib.py"]
    finally:
        scheduler.stop()


def test_a_tally_reports_the_keys_each_kind_always_had():
    t = Tally(started=3, finished=1, cancelled=1, preempted=2)
    assert t.counts() == {"started": 3, "finished": 1, "cancelled": 1, "preempted": 2}
    assert t.counts(preempted=False) == {"started": 3, "finished": 1, "cancelled": 1}


async def _warm(backend: FakeBackend) -> tuple[Tally, list[dict], list[tuple[str, Prediction]]]:
    jobs, scheduler, events = await _jobs(backend)
    logged: list[dict] = []
    events.add_sink(logged.append)
    counted: list[tuple[str, Prediction]] = []
    tally = Tally()
    try:
        warmer = Warmer(jobs, events, tally, lambda kind, p: counted.append((kind, p)), lambda doc: 1)
        warmer.submit("d1", WINDOW, GenSettings(), CONTEXT)
        while tally.finished + tally.cancelled < tally.started:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # the end is reported on the loop
        return tally, logged, counted
    finally:
        scheduler.stop()


async def test_a_warm_up_runs_the_same_lifecycle_and_logs_its_prefill():
    tally, logged, counted = await _warm(FakeBackend(warms=True))
    assert (tally.started, tally.finished) == (1, 1)
    assert [kind for kind, _ in counted] == ["warmup"]
    (event,) = [e for e in logged if e["event"] == "warmup"]
    assert {"doc", "prefill_tokens", "reused_tokens", "prefill_ms", "context_tokens", "context_chunks"} <= event.keys()
    assert "decode_tokens" not in event  # a warm-up decodes nothing


async def test_a_backend_that_cannot_prefill_alone_warms_nothing_and_logs_nothing():
    tally, logged, counted = await _warm(FakeBackend())
    assert (tally.started, tally.finished, tally.cancelled) == (1, 1, 0)
    assert counted == [] and not [e for e in logged if e["event"] == "warmup"]


async def test_a_second_warm_up_of_a_document_cancels_the_first():
    backend = FakeBackend(warms=True, delay=0.0)
    jobs, scheduler, events = await _jobs(backend)
    try:
        gate = threading.Event()
        scheduler.submit(lambda stop: gate.wait(5), FOREGROUND, "busy")  # holds the worker: both warm-ups queue
        tally = Tally()
        warmer = Warmer(jobs, events, tally, lambda kind, p: None, lambda doc: 0)
        warmer.submit("d1", WINDOW, GenSettings(), EMPTY)
        warmer.submit("d1", Window(0, "x = 1", "\n"), GenSettings(), EMPTY)
        gate.set()
        while tally.finished + tally.cancelled < tally.started:
            await asyncio.sleep(0.01)
        assert (tally.started, tally.finished, tally.cancelled) == (2, 1, 1)
        assert [w[0] for w in backend.warmed] == ["x = 1"]
    finally:
        scheduler.stop()


def test_a_run_queued_off_any_loop_is_counted_and_reported_on_the_thread_that_ended_it():
    scheduler = Scheduler()
    try:
        tally, ends = Tally(), []
        ended = threading.Event()

        def heard(job, result):
            ends.append((job.label, result, threading.current_thread().name))
            ended.set()

        queue(scheduler, lambda stop: 7, 0, "seven", tally, heard)
        assert ended.wait(5)
        ended.clear()
        queue(scheduler, lambda stop: 1 / 0, 0, "fails", tally, heard)
        assert ended.wait(5)
        assert [(label, result) for label, result, _ in ends] == [("seven", 7), ("fails", None)]
        assert all(thread.startswith("tabd-model") for _, _, thread in ends)  # no loop to hand it to
        assert (tally.started, tally.finished, tally.cancelled) == (2, 1, 1)
    finally:
        scheduler.stop()


def test_the_model_loads_before_any_run_queued_with_it():
    scheduler, order = Scheduler(), []
    gate = threading.Event()
    try:
        scheduler.submit(lambda stop: gate.wait(5), FOREGROUND, "busy")  # holds the worker: the next two queue
        queue(scheduler, lambda stop: order.append("request"), FOREGROUND, "request", Tally())

        def factory(config):
            order.append("load")
            return FakeBackend()

        model = Model(Config(), factory, scheduler, EventLog())
        gate.set()
        deadline = threading.Event()
        while len(order) < 2 and not deadline.wait(0.01):
            pass
        assert order == ["load", "request"] and model.backend is not None
    finally:
        scheduler.stop()


async def test_a_short_window_answer_prefills_the_whole_window_once_in_the_background():
    window = Window(0, "a = 1\nb = 2\nc = ", "\n")
    backend = FakeBackend(warms=True, text=lambda prefix, suffix: Prediction("3", window_chars=6))
    loaded, scheduler, events = await _jobs(backend)
    jobs = ModelJobs(scheduler, loaded.model, events)
    logged: list[dict] = []
    events.add_sink(logged.append)
    try:
        ends, done, ended = _ends()
        jobs.start(ModelCall(window, GenSettings(), "d1"), FOREGROUND, "request", Tally(), ended)
        await asyncio.wait_for(done.wait(), 5)
        while jobs.whole.finished + jobs.whole.cancelled < jobs.whole.started:
            await asyncio.sleep(0.01)
        assert backend.warmed == [(window.prefix, window.suffix, "d1")]  # the whole window, in the request's slot
        assert (jobs.whole.started, jobs.whole.finished) == (1, 1)
        assert [e.get("whole") for e in logged if e["event"] == "warmup"] == [True]
    finally:
        scheduler.stop()


class FailingSwap(FakeBackend):
    def can_hand_over(self) -> bool:
        return True

    def prepare_hand_over(self) -> str:
        return "fast engine"

    def hand_over(self, fast: str) -> None:
        raise RuntimeError("the fast engine would not start")


def test_a_hand_over_whose_swap_fails_says_failed_and_the_backend_keeps_answering(monkeypatch):
    monkeypatch.setattr(handover_module, "IDLE_S", 0.05)
    scheduler = Scheduler()
    backend = FailingSwap()
    try:
        h = HandOver(scheduler, EventLog())
        h.start(backend)
        h.answered()
        done = threading.Event()
        while h.state not in ("done", "failed") and not done.wait(0.02):
            pass
        assert h.state == "failed"
        answer = queue(scheduler, lambda stop: backend.predict(Query("x = ", "", GenSettings())), FOREGROUND, "request")
        assert answer.future.result(5).text == "return 42"
        h.close()
    finally:
        scheduler.stop()
