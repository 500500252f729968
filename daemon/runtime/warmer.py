"""KV warm-ups: background prefills of a document's prompt (llama.vim's n_predict 0), one per document at a time.

A warm-up runs when a document's context changes or the user moves there
(workspace.py), so the first request there finds its prompt's keys and values
computed. Any request pre-empts it; a request for the same document cancels it
(the request runs that prompt itself: the lifecycle, jobs.py, keeps the warm-up
of each document and ends it there).
"""
from __future__ import annotations

from typing import Callable

from tabd.cache.state import Window
from tabd.daemon.context.chunk_store import Snapshot
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.jobs import ModelCall, ModelJobs, Tally
from tabd.daemon.runtime.fields import warmup_fields
from tabd.predictor.types import GenSettings, Prediction

WARMUP_PRIORITY = 1  # with the first prefetches: any request pre-empts it


class Warmer:
    def __init__(self, jobs: ModelJobs, events: EventLog, tally: Tally, count: Callable[[str, Prediction], None],
                 chunks_of: Callable[[str], int]) -> None:
        self.jobs, self.events, self.tally, self.count = jobs, events, tally, count
        self.chunks_of = chunks_of  # a document's context chunks now, for the log line

    def submit(self, doc: str, window: Window, settings: GenSettings, context: Snapshot) -> None:
        """Warm the document's prompt up, in place of its warm-up still under way (one per document: its KV slot)."""
        self.jobs.warm(ModelCall(window, settings, doc, context), WARMUP_PRIORITY, f"warmup:{doc}", self.tally,
                       lambda job, p: self._ended(doc, p))

    def cancel(self, doc: str) -> None:
        """A request runs the document's prompt itself: a warm-up still queued would only rewind its KV after it."""
        self.jobs.cancel_warmup(doc)

    def _ended(self, doc: str, p: Prediction | None) -> None:
        if p is None:  # cancelled, failed, or a backend that cannot prefill without decoding (the request pays)
            return
        self.count("warmup", p)
        self.events.emit("warmup", doc=doc, **warmup_fields(p), context_chunks=self.chunks_of(doc))
