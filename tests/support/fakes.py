"""The one fake backend the tests share: a Backend (predictor/types.py) whose answers, failures and delays a test
chooses, and which records what it was asked, so a test can see a model call start and be stopped."""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from tabd.predictor.types import Backend, ContextChunk, Interrupted, Prediction, Query, never


class FakeBackend(Backend):
    model_id = "fake"
    engine_name = "fake"

    def __init__(self, fail: bool = False, delay: float = 0.0,
                 text: str | Callable[[str, str], str | Prediction] = "return 42", warms: bool = False) -> None:
        """text: the answer, or a function of (prefix, suffix) giving it, as a string or as a whole Prediction (to
        script its per-token confidence); warms: warm() prefills (and records it) instead of answering None."""
        self.fail = fail
        self.delay = delay
        self.text = text
        self.warms = warms  # False: warm() is the Backend default (None: it cannot prefill alone)
        self.calls: list[tuple[str, str, str]] = []  # (prefix, suffix, slot_id) of every predict() begun
        self.contexts: list[Sequence[ContextChunk]] = []  # the context of every predict() and warm() begun
        self.warmed: list[tuple[str, str, str]] = []  # (prefix, suffix, slot_id) of every warm() that prefilled
        self.interrupted = 0  # predict() calls stopped by should_stop()
        self.finished = 0
        self.started = threading.Event()  # set when a predict() begins

    def predict(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        prefix, suffix = query.prefix, query.suffix
        self.calls.append((prefix, suffix, query.slot_id))
        self.contexts.append(query.context)
        self.started.set()
        deadline = time.monotonic() + self.delay
        while time.monotonic() < deadline:
            if should_stop():
                self.interrupted += 1
                raise Interrupted()
            time.sleep(0.01)
        if self.fail:
            raise RuntimeError("model exploded")
        self.finished += 1
        answer = self.text(prefix, suffix) if callable(self.text) else self.text
        return answer if isinstance(answer, Prediction) else Prediction(answer)

    def warm(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction | None:
        self.contexts.append(query.context)
        if not self.warms:
            return None
        self.warmed.append((query.prefix, query.suffix, query.slot_id))
        return Prediction("", prefill_tokens=len(query.prefix) // 3,
                          context_tokens=sum(len(c.text) for c in query.context) // 3)
