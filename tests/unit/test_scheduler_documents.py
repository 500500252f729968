"""Requests of different documents take turns: the newest pre-empts an older one, which resumes after it."""
from __future__ import annotations

import threading
import time

from tabd.daemon.runtime.scheduler import FOREGROUND, Scheduler
from tabd.predictor.types import Interrupted


def chunks(n: int, log: list, name: str, started: threading.Event | None = None):
    """A job of n chunks that checks should_stop before each, as a prefill does; its progress survives a stop."""
    done = [0]

    def run(should_stop):
        if started is not None:
            started.set()
        while done[0] < n:
            if should_stop():
                log.append((name, "stopped", done[0]))
                raise Interrupted()
            time.sleep(0.01)
            done[0] += 1
        log.append((name, "done", n))
        return name

    return run


def test_a_newer_request_of_another_document_runs_first_and_the_older_resumes_where_it_stopped():
    s = Scheduler()
    log: list = []
    started = threading.Event()
    a = s.submit(chunks(40, log, "a", started), FOREGROUND, doc="a")
    assert started.wait(5)
    time.sleep(0.05)
    b = s.submit(chunks(3, log, "b"), FOREGROUND, doc="b")
    assert b.future.result(5) == "b"
    assert a.future.result(5) == "a"
    names = [entry[:2] for entry in log]
    assert names.index(("a", "stopped")) < names.index(("b", "done")) < names.index(("a", "done"))
    stopped_at = next(e[2] for e in log if e[:2] == ("a", "stopped"))
    assert 0 < stopped_at < 40  # its chunks before the stop are not run again (the job's own progress)
    assert a.preemptions == 1 and a.paused_s > 0
    assert b.preemptions == 0
    s.stop()


def test_within_one_document_and_for_no_document_requests_do_not_preempt_each_other():
    s = Scheduler()
    log: list = []
    started = threading.Event()
    a = s.submit(chunks(10, log, "a", started), FOREGROUND, doc="a")
    assert started.wait(5)
    again = s.submit(chunks(1, log, "a2"), FOREGROUND, doc="a")  # the service cancels a superseded state itself
    edit = s.submit(chunks(1, log, "edit"), FOREGROUND)
    assert a.future.result(5) == "a" and again.future.result(5) == "a2" and edit.future.result(5) == "edit"
    assert not any(e[1] == "stopped" for e in log)
    s.stop()


def test_three_documents_the_newest_first_then_back_in_reverse_order():
    s = Scheduler()
    log: list = []
    started = threading.Event()
    a = s.submit(chunks(30, log, "a", started), FOREGROUND, doc="a")
    assert started.wait(5)
    time.sleep(0.03)
    b = s.submit(chunks(30, log, "b"), FOREGROUND, doc="b")
    time.sleep(0.05)
    c = s.submit(chunks(2, log, "c"), FOREGROUND, doc="c")
    for job in (a, b, c):
        job.future.result(10)
    done = [e[0] for e in log if e[1] == "done"]
    assert done == ["c", "b", "a"]
    s.stop()


def test_a_prefetch_still_yields_to_any_request():
    s = Scheduler()
    log: list = []
    started = threading.Event()
    bg = s.submit(chunks(30, log, "bg", started), 1, doc="a")
    assert started.wait(5)
    fg = s.submit(chunks(1, log, "fg"), FOREGROUND, doc="a")
    assert fg.future.result(5) == "fg" and bg.future.result(5) == "bg"
    assert bg.preemptions == 1
    s.stop()
