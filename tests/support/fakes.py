"""The one fake backend the tests share: a Backend (predictor/types.py) whose answers, failures and delays a test
chooses, and which records what it was asked, so a test can see a model call start and be stopped."""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from tabd.predictor.types import Backend, ContextChunk, GenSettings, Interrupted, Prediction


class FakeBackend(Backend):
    model_id = "fake"
    engine_name = "fake"

    def __init__(self, fail: bool = False, delay: float = 0.0,
                 text: str | Callable[[str, str], str | Prediction] = "return 42") -> None:
        """text: the answer, or a function of (prefix, suffix) giving it, as a string or as a whole Prediction (to
        script its per-token confidence)."""
        self.fail = fail
        self.delay = delay
        self.text = text
        self.calls: list[tuple[str, str, str]] = []  # (prefix, suffix, slot_id) of every predict() begun
        self.interrupted = 0  # predict() calls stopped by should_stop()
        self.finished = 0
        self.started = threading.Event()  # set when a predict() begins

    def predict(self, prefix: str, suffix: str, settings: GenSettings, should_stop: Callable[[], bool] = lambda: False,
                slot_id: str = "default", context: Sequence[ContextChunk] = ()) -> Prediction:
        self.calls.append((prefix, suffix, slot_id))
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
