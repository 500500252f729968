"""What a completion request ends with: the Outcome inside the service, and the Answer the LSP layer shows.

An empty answer says why it is empty (a reason code; README, "Why nothing shows"), so a client can show it in words.
"""
from __future__ import annotations

from dataclasses import dataclass

from tabd.predictor.types import Prediction

# why an answer is empty: the codes clients read (extend, never rename)
UNSURE = "unsure"  # confidence gating (or the shortest-worth-a-Tab rule) showed none of the suggestion
DEBOUNCED = "debounced"  # a newer keystroke came while the request waited for typing to pause
SUPERSEDED = "superseded"  # a newer request for the document took over
EXCLUDED = "excluded"  # the document is excluded (content exclusion)
DISABLED = "disabled"  # suggestions are switched off for the document or everywhere (tabd/setEnabled)
LOADING = "loading"  # the model is still loading
UNREACHABLE = "unreachable"  # the remote engine cannot be reached
SLOW = "slow"  # the remote engine answered nothing complete within --remote-timeout
ERROR = "error"  # the model could not load, or failed on this request
NOTHING = "nothing"  # the model wrote nothing
REASONS = (UNSURE, DEBOUNCED, SUPERSEDED, EXCLUDED, DISABLED, LOADING, UNREACHABLE, SLOW, ERROR, NOTHING)


@dataclass
class Answer:
    id: str
    text: str
    source: str  # cache, typed, inflight, model or none
    depth: int = 0
    key: str = ""
    latency_ms: float = 0.0
    # characters after the cursor the suggestion replaces: the editor's closers it writes itself (predictor/prompt/pairs.py),
    # so `foo(|)` with `x)` is shown and applied as `foo(x)|`
    replaces: int = 0
    reason: str = ""  # for an empty answer: why (one of REASONS); "" when it has text
    # an invoked request's other candidates, each with the characters after the cursor it replaces
    alternatives: tuple[tuple[str, int], ...] = ()


def refusal(reason: str) -> Answer:
    """The empty answer to a request the service never sees (an excluded or disabled document)."""
    return Answer("", "", "none", reason=reason)


def shown_source(source: str, text: str, hidden: bool) -> str:
    """The source an answer reports: a suggestion gating hid still counts for the layer that had it ready."""
    return source if text or hidden else "none"


def empty_reason(text: str, hidden: bool, cut: str = "", error: str | None = None) -> str:
    """Why an answer is empty ("" when it has text): the cut the service knows, gating, a failed model call, or
    nothing written."""
    if text:
        return ""
    if cut:
        return cut
    if hidden:
        return UNSURE
    if error is not None:
        return error_reason(error)
    return NOTHING


def error_reason(message: str) -> str:
    """The reason code of a failed model call: a remote engine that cannot be reached or is too slow, or another
    error (predictor/backends/remote.py's messages say "cannot reach" and "(timeout")."""
    if "cannot reach" in message:
        return UNREACHABLE
    return SLOW if "(timeout" in message else ERROR


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
    waited_out: bool = False  # debounce_ms is a debounce waited out whole (tabd/stats counts it), not one a keystroke cut
    cut: str = ""  # an empty answer's reason where the service knows it (debounced, superseded, loading)
    alternatives: tuple[str, ...] = ()  # other candidates to offer (an invoked request's)

    @property
    def shown_source(self) -> str:
        """The source the answer reports: a suggestion gating hid still counts for the layer that had it ready."""
        return shown_source(self.source, self.text, self.hidden)

    @property
    def computed(self) -> Prediction | None:
        """The model's prediction when this request's answer came from a model run it started."""
        return self.prediction if self.source == "model" else None

    @property
    def reason(self) -> str:
        """Why the answer is empty ("" when it has text)."""
        return empty_reason(self.text, self.hidden, self.cut, self.error)
