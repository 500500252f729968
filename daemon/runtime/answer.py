"""What a completion request ends with: the Outcome inside the service, and the Answer the LSP layer shows."""
from __future__ import annotations

from dataclasses import dataclass

from tabd.predictor.types import Prediction


@dataclass
class Answer:
    id: str
    text: str
    source: str  # cache, typed, inflight, model or none
    depth: int = 0
    key: str = ""
    latency_ms: float = 0.0
    # characters after the cursor the suggestion replaces: the editor's closers it writes itself (predictor/pairs.py),
    # so `foo(|)` with `x)` is shown and applied as `foo(x)|`
    replaces: int = 0


@dataclass(frozen=True)
class Outcome:
    """What a request ended with: the text and where it came from, with the model's figures when it ran."""

    text: str
    source: str
    depth: int = 0
    prediction: Prediction | None = None
    queue_ms: float = 0.0
    cache_ms: float = 0.0
    from_key: str = ""  # for a typed answer: the key of the suggestion typed into
    hidden: bool = False  # the layer had a suggestion, and confidence gating showed none of it
    error: str | None = None
    debounce_ms: float = 0.0  # the wait before the model (0 for an answer from memory before any wait)
    debounce_why: str = ""

    @property
    def shown_source(self) -> str:
        """The source the answer reports: a suggestion gating hid still counts for the layer that had it ready."""
        return self.source if self.text or self.hidden else "none"

    @property
    def computed(self) -> Prediction | None:
        """The model's prediction when this request's answer came from a model run it started."""
        return self.prediction if self.source == "model" else None
