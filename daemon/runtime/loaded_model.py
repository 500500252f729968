"""The model the daemon asks: its backend, loaded once on the model worker, or why there is none."""
from __future__ import annotations

import asyncio
from typing import Callable

from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.heap import settle_heap
from tabd.daemon.runtime.jobs import queue
from tabd.daemon.runtime.scheduler import Scheduler
from tabd.predictor.types import Backend

LOAD_PRIORITY = -1  # before any request


class Model:
    """Loads the backend on the model worker, a run like any other (jobs.queue; requests queue behind the load), and
    tells `on_loaded` on that thread."""

    def __init__(self, config: Config, factory: Callable[[Config], Backend], scheduler: Scheduler, events: EventLog,
                 on_loaded: Callable[[Backend], None] = lambda backend: None) -> None:
        self.backend: Backend | None = None
        self.error: str | None = None
        self._model_id = "loading"  # until the load: requests before it have no key
        self._events = events
        self._on_loaded = on_loaded
        self._job = queue(scheduler, lambda stop: self._load(factory, config), LOAD_PRIORITY, "load")
        self.loaded = False  # the load has ended, with a backend or with an error (read by every request)
        self._job.future.add_done_callback(self._ended)

    def _ended(self, _: object) -> None:
        self.loaded = True

    @property
    def model_id(self) -> str:
        """Part of every cache key: the backend's, which a remote engine changes when it serves another model."""
        return self.backend.model_id if self.backend is not None else self._model_id


    async def ready(self) -> bool:
        """Wait for the load; whether there is a backend."""
        if not self._job.future.done():
            # shielded: a request cancelled while the model loads must not cancel the loading
            await asyncio.shield(asyncio.wrap_future(self._job.future))
        # once loaded, no await: wrapping a done future still costs a self-pipe wake-up and a loop turn per request
        return self.backend is not None

    def _load(self, factory: Callable[[Config], Backend], config: Config) -> None:
        try:
            backend = factory(config)
            self._model_id = backend.model_id
        except Exception as exc:  # reported to the user, not raised into a request
            self.error = str(exc)
            self._model_id = "unavailable"
            self._events.emit("error", where="load", message=self.error)
            return
        self.backend = backend
        try:
            self._on_loaded(backend)
        except Exception as exc:  # what follows a load (the hand-over) may fail; the loaded backend still answers
            self._events.emit("error", where="after load", message=f"{type(exc).__name__}: {exc}"[:300])
        settle_heap()
