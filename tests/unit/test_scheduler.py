"""The model worker: priorities, pre-emption between steps, cancellation, several workers."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from tabd.daemon.runtime.scheduler import FOREGROUND, Cancelled, Scheduler
from tabd.predictor.types import Interrupted


def steps(n: int, log: list, name: str, gate: threading.Event | None = None):
    """A job of n steps that checks should_stop between them, like a decode loop."""

    def run(should_stop):
        for i in range(n):
            if gate is not None:
                gate.wait(5)
            if should_stop():
                log.append((name, "stopped", i))
                raise Interrupted()
            time.sleep(0.002)
        log.append((name, "done", n))
        return name

    return run


def test_foreground_preempts_a_prefetch_which_then_resumes():
    s = Scheduler()
    log: list = []
    gate = threading.Event()
    background = s.submit(steps(50, log, "bg", gate), 1)
    time.sleep(0.05)  # the prefetch is running, held at its first step
    foreground = s.submit(steps(3, log, "fg"), FOREGROUND)
    gate.set()
    assert foreground.future.result(5) == "fg"
    assert background.future.result(5) == "bg"
    names = [entry[:2] for entry in log]
    assert names.index(("bg", "stopped")) < names.index(("fg", "done")) < names.index(("bg", "done"))
    assert background.preemptions == 1
    s.stop()


def test_cancelled_jobs_stop_between_steps_and_say_so():
    s = Scheduler()
    log: list = []
    gate = threading.Event()
    job = s.submit(steps(100, log, "x", gate), FOREGROUND)
    queued = s.submit(steps(1, log, "y"), FOREGROUND)
    time.sleep(0.05)
    s.cancel(job)
    s.cancel(queued)
    gate.set()
    with pytest.raises(Cancelled):
        job.future.result(5)
    with pytest.raises(Cancelled):
        queued.future.result(5)
    assert ("y", "done", 1) not in log
    s.stop()


def test_promotion_runs_a_queued_prefetch_before_other_prefetches():
    s = Scheduler()
    order: list = []
    gate = threading.Event()
    blocker = s.submit(lambda stop: gate.wait(5), FOREGROUND)
    a = s.submit(lambda stop: order.append("a"), 2)
    b = s.submit(lambda stop: order.append("b"), 2)
    s.promote(b, FOREGROUND)
    gate.set()
    for job in (blocker, a, b):
        job.future.result(5)
    assert order == ["b", "a"]
    assert s.depth() == 0
    s.stop()


def test_with_two_workers_a_request_does_not_preempt_a_running_prefetch():
    s = Scheduler(workers=2)
    log: list = []
    background = s.submit(steps(20, log, "bg"), 1)
    time.sleep(0.01)
    foreground = s.submit(steps(3, log, "fg"), FOREGROUND)
    assert foreground.future.result(5) == "fg" and background.future.result(5) == "bg"
    assert background.preemptions == 0
    s.stop()


def test_errors_reach_the_waiter_and_the_worker_goes_on():
    s = Scheduler()

    def boom(stop):
        raise RuntimeError("model failed")

    bad = s.submit(boom, FOREGROUND)
    with pytest.raises(RuntimeError, match="model failed"):
        bad.future.result(5)
    assert s.submit(lambda stop: 42, FOREGROUND).future.result(5) == 42
    s.stop()
    late = s.submit(lambda stop: 1, FOREGROUND)
    with pytest.raises(Cancelled):
        late.future.result(1)


class SlowRunner:
    """A fake model whose every prefill chunk takes as long as the test says: it waits on `go` per chunk."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, int]] = []  # (who, first position) per chunk run
        self.entered = threading.Semaphore(0)
        self.go = threading.Semaphore(0)
        self.who = ""

    def forward_last(self, ids, cache):
        self.entered.release()
        self.go.acquire(timeout=5)
        self.chunks.append((self.who, cache.length))
        cache.length += len(ids)
        return torch.zeros(4)


def test_a_request_waits_at_most_the_prefill_chunk_in_flight():
    from tabd.predictor.engine import generate

    class Cache:
        length = 0

    runner, s = SlowRunner(), Scheduler()
    kept: list[int] = []
    prompt = list(range(1000))

    def prefetch(stop):  # as predict does: start after what the cache holds, keep each chunk
        runner.who = "bg"
        generate.prefill(runner, prompt[len(kept):], cache, 100, stop, kept.extend)
        return "bg"

    def request(stop):
        runner.who = "fg"
        return generate.prefill(runner, [1, 2], Cache(), 100, stop) is not None and "fg"

    cache = Cache()
    bg = s.submit(prefetch, 1)
    for _ in range(3):  # let three chunks run; the fourth is in flight when the request comes
        runner.entered.acquire(timeout=5)
        runner.go.release()
    runner.entered.acquire(timeout=5)
    fg = s.submit(request, FOREGROUND)
    for _ in range(20):
        runner.go.release()
    try:
        assert fg.future.result(5) == "fg" and bg.future.result(5) == "bg"
    finally:
        s.stop()
    first_fg = runner.chunks.index(("fg", 0))
    assert [who for who, _ in runner.chunks[:first_fg]] == ["bg"] * 4  # only the chunk in flight ran before it
    bg_starts = [pos for who, pos in runner.chunks if who == "bg"]
    assert bg_starts == list(range(0, 1000, 100))  # resumed at 400: no chunk run twice, none lost
    assert bg.preemptions == 1


def test_a_hush_holds_background_jobs_back_but_not_foreground_ones():
    """After an answer from memory the service hushes the worker (service.HUSH_S): a prefetch queued then waits,
    a request does not; once the hush is over the prefetch runs."""
    s = Scheduler()
    log: list = []
    s.hush(60)
    held = s.submit(steps(1, log, "bg"), 1)  # queued first, the worker idle: without the hush it would run now
    foreground = s.submit(steps(1, log, "fg"), FOREGROUND)
    assert foreground.future.result(10) == "fg"
    assert log == [("fg", "done", 1)] and not held.done()
    s.stop()
    with pytest.raises(Cancelled):
        held.future.result(1)

    s = Scheduler()
    log.clear()
    s.hush(0.05)
    assert s.submit(steps(1, log, "bg"), 1).future.result(10) == "bg"
    s.stop()


def _until(check, what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_on_an_engine_without_priorities_a_prefetch_waits_for_the_users_request():
    # the engine runs what it gets side by side: a prefetch would slow the request
    s = Scheduler(workers=2, holds_background=lambda: True)
    release, order = threading.Event(), []

    def request(should_stop):
        order.append("request starts")
        release.wait(10)
        order.append("request ends")

    def prefetch(should_stop):
        order.append("prefetch starts")

    fg = s.submit(request, FOREGROUND)
    _until(lambda: order == ["request starts"], "the request started")
    bg = s.submit(prefetch, 1)
    _until(lambda: s.held == 1, "the free worker held the prefetch back")
    assert order == ["request starts"]
    release.set()
    fg.future.result(5), bg.future.result(5)
    assert order == ["request starts", "request ends", "prefetch starts"]
    s.stop()


def test_on_an_engine_with_priorities_a_prefetch_runs_beside_the_request():
    s = Scheduler(workers=2)  # holds_background stays False: the engine itself runs the request first
    release, order = threading.Event(), []

    def request(should_stop):
        order.append("request starts")
        release.wait(10)
        order.append("request ends")

    fg = s.submit(request, FOREGROUND)
    _until(lambda: order == ["request starts"], "the request started")
    bg = s.submit(lambda should_stop: order.append("prefetch runs"), 1)
    bg.future.result(5)
    assert order == ["request starts", "prefetch runs"] and s.held == 0
    release.set()
    fg.future.result(5)
    s.stop()
