"""A request's wait before its run (what its budget is told, Query.waited_ms): counted from its asking, a prefetch's
from its promotion to a request."""
from __future__ import annotations

import threading
import time

from tabd.daemon.runtime.jobs import waited_ms
from tabd.daemon.runtime.scheduler import FOREGROUND, Scheduler


def test_a_request_is_told_its_wait_behind_the_job_under_way_and_a_promoted_prefetch_from_its_promotion():
    s = Scheduler()
    gate, seen = threading.Event(), {}

    def record(name):
        def run(should_stop):
            seen[name] = (waited_ms(jobs[name]), time.monotonic())
            return name
        return run

    jobs = {}
    try:
        busy = s.submit(lambda should_stop: gate.wait(5), 1)  # a warm-up's chunk under way: nothing pre-empts it
        jobs["request"] = s.submit(record("request"), FOREGROUND, doc="a")
        jobs["prefetch"] = s.submit(record("prefetch"), 2, doc="b")
        time.sleep(0.01)
        s.promote(jobs["prefetch"], FOREGROUND)  # a request now awaits the prefetch: it counts as asked now
        gate.set()
        assert busy.future.result(5) and jobs["request"].future.result(5) and jobs["prefetch"].future.result(5)
    finally:
        s.stop()
    request, prefetch = jobs["request"], jobs["prefetch"]
    assert request.asked_at == request.queued_at < prefetch.queued_at < prefetch.asked_at
    for name, job in jobs.items():  # the whole time from its asking to its run, as its run began
        waited, ran_at = seen[name]
        assert 0 < waited <= (ran_at - job.asked_at) * 1000
    assert waited_ms(None) == 0.0
