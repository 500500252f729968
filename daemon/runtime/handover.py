"""After a torch-free start: the fast engine takes over once the daemon has answered and the user pauses.

The torch-free runner answers the first requests (no `import torch` before
them); its long prompts run several times slower than torch's prefill. So once
the first model answer is out (or a while after the load, if none is asked
for) and no request has come for IDLE_S, a thread imports torch and builds
the fast engine over the same weights (backend.prepare_hand_over), and a job
on the model thread swaps the runners between two requests (backend.hand_over).
The import holds the GIL for long stretches over about 2 s (cache hits waited up to 193 ms during it), which
is why it waits for a pause; any request, a cache hit too, restarts the wait. A request says so as it ends (answered or
cancelled: activity.py); on its way to the model it is in the scheduler's queue, which holds the hand-over off too,
but for its debounce's few milliseconds, where it meets the hand-over as a pause that ended as the import began.

A pause can end in the middle of the import, so the import is also held between modules (ImportGate): while a
suggestion shows, the user may press Tab at any moment, and the next module's import (up to about 60 ms holding
the GIL, torch's own libraries excluded: predictor/engine/torchlibs.py) waits until the suggestion is gone, or has
shown for HOLD_S. A suggestion that appears during one module's import is read by the user for longer than that
module takes, so a Tab meets no import. The thread runs below the LSP thread's priority (priority.py).
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time

from typing import Any, Callable, Protocol, cast

from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.heap import settle_heap
from tabd.daemon.runtime.jobs import queue
from tabd.daemon.runtime.priority import run_in_background
from tabd.daemon.runtime.scheduler import Job, Scheduler
from tabd.predictor.types import Backend

AFTER_LOAD_S = 5.0  # with no request at all, hand over this long after the load
IDLE_S = 3.0  # no request for this long: the user paused (a short pause between lines is often 1-2 s)
# a suggestion shown this long with no answer from the user: the import goes on (nobody waits forever); the
# environment may set it (tests hold the import until a dismissal)
HOLD_S = float(os.environ.get("TABD_HAND_OVER_HOLD_S", "10"))
POLL_S = 0.02  # how often a held import looks again
HAND_OVER_PRIORITY = -1  # the swap runs before any request, between two of them


class HandsOver(Protocol):
    """A backend after a torch-free start (can_hand_over() is True): LocalBackend."""

    def prepare_hand_over(self) -> Any:
        """The fast engine over the same weights (imports torch; off the model thread)."""

    def hand_over(self, fast: Any) -> None:
        """Swap the runners (on the model thread, between two requests)."""


class HandOver:
    """An activity listener (activity.py): off until start() is given a backend that can hand over."""

    def __init__(self, scheduler: Scheduler, events: EventLog) -> None:
        self.scheduler = scheduler
        self.events = events
        self.state = "off"  # off -> waiting -> preparing -> queued -> done (or failed)
        self.prepare_ms = 0.0
        self._backend: HandsOver | None = None
        self._answered = threading.Event()
        self._stop = threading.Event()
        self._last_request = time.monotonic()
        self.gate = ImportGate(self._stop)
        self.nice: int | None = None

    def start(self, backend: Backend) -> None:
        """After the load: hand over if this backend can, once the daemon has answered and the user pauses."""
        if not backend.can_hand_over():
            return
        self._backend = cast(HandsOver, backend)  # can_hand_over() says it is one
        self._last_request = time.monotonic()
        self.state = "waiting"
        threading.Thread(target=self._run, name="tabd-hand-over", daemon=True).start()

    def requested(self) -> None:
        self._last_request = time.monotonic()

    def shown(self, showing: bool) -> None:
        """The daemon's latest answer shows a suggestion (True) or nothing, or it was dismissed (False)."""
        self.gate.shown(showing)

    def answered(self) -> None:
        if not self._answered.is_set():
            self._answered.set()

    def close(self) -> None:
        self._stop.set()
        self._answered.set()

    def summary(self) -> dict[str, Any]:
        if self.state == "off":
            return {"state": "off"}
        return {"state": self.state, "prepare_ms": round(self.prepare_ms, 1), **self.gate.summary()}

    def nice_fields(self) -> dict[str, int | None]:
        """Its thread's nice value for tabd/stats "nice", once there is a thread."""
        return {} if self.state == "off" else {"hand_over": self.nice}

    def _wait_for_a_pause(self) -> bool:
        self._answered.wait(AFTER_LOAD_S)
        while not self._stop.is_set():
            quiet = time.monotonic() - self._last_request
            if quiet >= IDLE_S and self.scheduler.depth() == 0:
                return True
            self._stop.wait(max(0.05, IDLE_S - quiet))
        return False

    def _run(self) -> None:
        self.nice = run_in_background("tabd-hand-over")
        backend = self._backend
        assert backend is not None  # start() set it before this thread began
        if not self._wait_for_a_pause():
            return
        self.state = "preparing"
        t0 = time.monotonic()
        # torch's import leaves ~10^5 new objects: a collection among them held the GIL 30-70 ms (measured, on the
        # LSP thread too); none runs while it imports, and they are frozen out of the collector's sight at the end
        # (and at each wait of the gate, which lets the collector run while it waits)
        self.gate.collecting = gc.isenabled()  # whether the collector ran before the hand-over turned it off
        gc.disable()
        try:
            with self.gate:
                fast = backend.prepare_hand_over()
        except Exception as exc:  # the torch-free runner keeps serving: a failed hand-over costs speed, not answers
            self._settle(frozen=False)
            self.state = "failed"
            self.events.emit("error", where="hand-over", message=f"{type(exc).__name__}: {exc}"[:300])
            return
        self.prepare_ms = (time.monotonic() - t0) * 1000
        self.state = "queued"

        def swap(should_stop: Callable[[], bool]) -> bool:
            backend.hand_over(fast)
            return True

        queue(self.scheduler, swap, HAND_OVER_PRIORITY, "hand-over", ended=self._done)

    def _done(self, job: Job, swapped: bool | None) -> None:
        """On the thread that ended the swap (the model thread; this thread, if the scheduler had stopped)."""
        failed = swapped is None
        self._settle(frozen=not failed)  # before "done" is seen: whoever reads it finds the collector back
        self.state = "failed" if failed else "done"

    def _settle(self, frozen: bool) -> None:
        if frozen:
            settle_heap()  # torch and the fast engine are here to stay
        if self.gate.collecting:
            gc.enable()


class ImportGate:
    """Holds the hand-over thread before each module it imports while a suggestion shows (until it has shown HOLD_S).

    An audit hook (sys.addaudithook: the "import" event comes before a module is found or loaded, with no import
    lock taken) sees each import; only the thread inside `with gate:` waits, every other thread passes. A hook
    cannot be removed, so after the hand-over it is one comparison per audit event."""

    _hooked = False
    _active: "ImportGate | None" = None  # the gate of the hand-over under way; one at a time per process

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._thread: int | None = None
        self._showing_since: float | None = None
        self.held = 0  # imports that waited
        self.held_ms = 0.0
        self.holding = False  # an import waits now
        self.collecting = False  # whether the collector runs outside the import (it may run while an import waits)
        self.collections = 0  # collections while torch imports (none, unless someone turns the collector on)

    def shown(self, showing: bool) -> None:
        self._showing_since = time.monotonic() if showing else None  # each new suggestion may be taken anew

    def summary(self) -> dict[str, Any]:
        return {"imports_held": self.held, "held_ms": round(self.held_ms, 1), "holding": self.holding,
                "collections_while_importing": self.collections}

    def __enter__(self) -> "ImportGate":
        self._thread = threading.get_ident()
        ImportGate._active = self
        gc.callbacks.append(self._counted)
        if not ImportGate._hooked:
            ImportGate._hooked = True
            sys.addaudithook(_on_audit)
        return self

    def __exit__(self, *exc: object) -> None:
        ImportGate._active = None
        self._thread = None
        gc.callbacks.remove(self._counted)

    def _counted(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and not self.holding:
            self.collections += 1

    def wait(self) -> None:
        """On the hand-over thread, before a module is imported: wait while a suggestion shows (HOLD_S at most)."""
        if threading.get_ident() != self._thread:
            return
        t0 = time.monotonic()
        while not self._stop.is_set():
            since = self._showing_since
            if since is None or time.monotonic() - since >= HOLD_S:
                break
            if not self.holding:
                self.holding = True
                self.held += 1
                self._collect(True)  # a wait may be long: what it leaves behind is collected meanwhile
            self._stop.wait(POLL_S)
        if self.holding:
            self.holding = False
            self.held_ms += (time.monotonic() - t0) * 1000
            self._collect(False)

    def _collect(self, on: bool) -> None:
        """The collector on while an import waits, off while it imports; what torch has loaded so far is frozen
        first (a splice of the collector's lists, not a walk), so no collection meets it."""
        if not self.collecting:
            return
        if on:
            settle_heap()
            gc.enable()
        else:
            gc.disable()


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "import":
        gate = ImportGate._active
        if gate is not None:
            gate.wait()
