"""After a torch-free start: the fast engine takes over once the daemon has answered and the user pauses.

The torch-free runner answers the first requests (no `import torch` before
them); its long prompts run several times slower than torch's prefill. So once
the first model answer is out (or a while after the load, if none is asked
for) and no request has come for IDLE_S, a thread imports torch and builds
the fast engine over the same weights (backend.prepare_hand_over), and a job
on the model thread swaps the runners between two requests (backend.hand_over).
The import holds the GIL for long stretches over about 2 s (cache hits waited up to 193 ms during it), which
is why it waits for a pause; any request, a cache hit too (service.lookup), restarts the wait.
"""
from __future__ import annotations

import threading
import time

AFTER_LOAD_S = 5.0  # with no request at all, hand over this long after the load
IDLE_S = 3.0  # no request for this long: the user paused (a short pause between lines is often 1-2 s)


class HandOver:
    def __init__(self, backend, scheduler, events) -> None:
        self.backend = backend
        self.scheduler = scheduler
        self.events = events
        self.state = "waiting"  # waiting -> preparing -> queued -> done (or failed); "off" where there is none
        self.prepare_ms = 0.0
        self._answered = threading.Event()
        self._stop = threading.Event()
        self._last_request = time.monotonic()
        threading.Thread(target=self._run, name="tabd-hand-over", daemon=True).start()

    def requested(self) -> None:
        self._last_request = time.monotonic()

    def answered(self) -> None:
        if not self._answered.is_set():
            self._answered.set()

    def close(self) -> None:
        self._stop.set()
        self._answered.set()

    def summary(self) -> dict:
        return {"state": self.state, "prepare_ms": round(self.prepare_ms, 1)}

    def _wait_for_a_pause(self) -> bool:
        self._answered.wait(AFTER_LOAD_S)
        while not self._stop.is_set():
            quiet = time.monotonic() - self._last_request
            if quiet >= IDLE_S and self.scheduler.depth() == 0:
                return True
            self._stop.wait(max(0.05, IDLE_S - quiet))
        return False

    def _run(self) -> None:
        if not self._wait_for_a_pause():
            return
        self.state = "preparing"
        t0 = time.monotonic()
        try:
            fast = self.backend.prepare_hand_over()
        except Exception as exc:  # the torch-free runner keeps serving: a failed hand-over costs speed, not answers
            self.state = "failed"
            self.events.emit("error", where="hand-over", message=f"{type(exc).__name__}: {exc}"[:300])
            return
        self.prepare_ms = (time.monotonic() - t0) * 1000
        self.state = "queued"
        job = self.scheduler.submit(lambda stop: self.backend.hand_over(fast), -1, "hand-over")
        job.future.add_done_callback(self._done)

    def _done(self, fut) -> None:
        self.state = "failed" if fut.cancelled() or fut.exception() is not None else "done"
        if self.state == "done":
            from tabd.daemon.runtime.service import settle_heap

            settle_heap()  # torch and the fast engine are here to stay
