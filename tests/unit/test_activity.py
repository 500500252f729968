"""Activity listeners (daemon/runtime/activity.py) and the hand-over as one of them (handover.py)."""
from __future__ import annotations

import time

from support.fakes import FakeBackend
from tabd.daemon.runtime import handover as handover_module
from tabd.daemon.runtime.activity import Listeners
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.scheduler import Scheduler


class Recorder:
    def __init__(self, name: str, heard: list[str]) -> None:
        self.name, self.heard = name, heard

    def requested(self) -> None:
        self.heard.append(f"{self.name}:requested")

    def shown(self, showing: bool) -> None:
        self.heard.append(f"{self.name}:shown={showing}")

    def answered(self) -> None:
        self.heard.append(f"{self.name}:answered")

    def close(self) -> None:
        self.heard.append(f"{self.name}:close")


def test_every_listener_hears_every_event_in_the_order_they_were_added():
    heard: list[str] = []
    listeners = Listeners(Recorder("a", heard))
    listeners.add(Recorder("b", heard))
    listeners.requested()
    listeners.shown(True)
    listeners.answered()
    listeners.close()
    assert heard == ["a:requested", "b:requested", "a:shown=True", "b:shown=True", "a:answered", "b:answered",
                     "a:close", "b:close"]


def test_a_hand_over_for_a_backend_that_cannot_stays_off_and_reports_off():
    scheduler = Scheduler()
    try:
        h = HandOver(scheduler, EventLog())
        h.start(FakeBackend())
        h.requested()
        h.shown(True)
        h.answered()
        assert (h.state, h.summary(), h.nice_fields()) == ("off", {"state": "off"}, {})
        h.close()
    finally:
        scheduler.stop()


class Swappable(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.swapped = None

    def can_hand_over(self) -> bool:
        return True

    def prepare_hand_over(self) -> str:
        return "fast engine"

    def hand_over(self, fast: str) -> None:
        self.swapped = fast


def test_a_backend_that_can_hand_over_is_swapped_once_answered_and_the_user_pauses(monkeypatch):
    monkeypatch.setattr(handover_module, "IDLE_S", 0.05)
    scheduler = Scheduler()
    backend = Swappable()
    try:
        h = HandOver(scheduler, EventLog())
        h.start(backend)
        assert h.state == "waiting" and "hand_over" in h.nice_fields()
        h.answered()
        deadline = time.monotonic() + 10
        while h.state != "done" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert h.state == "done" and backend.swapped == "fast engine"
        assert set(h.summary()) >= {"state", "prepare_ms", "imports_held"}
        h.close()
    finally:
        scheduler.stop()
