"""Counters, each kept by the collaborator whose work it counts, and read (never written) by report.py.

  Answers      the service's answers: sources, latency, after-accept hits, the last answer, debounce waits
  Speculation  the speculator's: accepts, dismisses, prefetch branches started, prefetched answers used

(A kind of model run's counters live with the lifecycle that runs it: Tally and PromptReuse, jobs.py.)
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tabd.predictor.types import Prediction

SOURCES = ("cache", "typed", "inflight", "model", "none")
REUSE_KINDS = ("request", "prefetch", "warmup")


def reuse_of(p: Prediction) -> float:
    """The share of the prompt whose keys and values were kept from before."""
    total = p.reused_tokens + p.prefill_tokens
    return round(p.reused_tokens / total, 4) if total else 0.0


def _window() -> deque[float]:
    return deque(maxlen=1000)


@dataclass
class Answers:
    sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    after_accept_requests: int = 0
    after_accept_from_cache: int = 0
    after_accept_ms: deque[float] = field(default_factory=_window)
    latency_ms: deque[float] = field(default_factory=_window)
    last_source: str = ""
    last_latency_ms: float = 0.0
    last_depth: int = 0  # the speculation depth that computed the last answer (0: the request itself)
    last_debounce_ms: float = 0.0  # what the last answer waited before the model (0: it came from memory)
    last_origin: str = ""  # the layer that answered last, even with nothing to show (model: the model ran for it)
    last_reason: str = ""  # why the last answer was empty ("" when it had text; runtime/answer.py's codes)
    refusals: dict[str, int] = field(default_factory=dict)  # requests answered empty before the service: excluded...
    # requests that waited out a debounce, and those a newer keystroke ended during it (they never reach the model)
    debounce: dict[str, int] = field(default_factory=lambda: {"waited": 0, "superseded": 0})
    debounce_ms: deque[float] = field(default_factory=_window)  # the waits, for their median
    served_by: dict[str, int] = field(default_factory=dict)  # model answers per engine, by its one name
    torch_free: int = 0  # model answers computed before torch was imported

    def answered(self, source: str, latency: float, after_accept: bool, depth: int, debounce_ms: float,
                 reason: str = "", origin: str = "") -> None:
        self.sources[source] += 1
        self.last_origin = origin or source
        self.latency_ms.append(latency)
        self.last_source, self.last_latency_ms = source, latency
        self.last_depth, self.last_debounce_ms, self.last_reason = depth, debounce_ms, reason
        if after_accept:
            self.after_accept_requests += 1
            self.after_accept_ms.append(latency)
            if self.last_origin in ("cache", "typed"):  # memory, even where what it had was nothing to show
                self.after_accept_from_cache += 1

    def refused(self, reason: str) -> None:
        """An empty answer the service was never asked for (an excluded or disabled document)."""
        self.last_source, self.last_latency_ms, self.last_depth, self.last_debounce_ms = "none", 0.0, 0, 0.0
        self.last_reason, self.last_origin = reason, "none"
        self.refusals[reason] = self.refusals.get(reason, 0) + 1

    def served(self, p: Prediction) -> None:
        """A request's model answer, by the engine that computed it (and whether torch was loaded then)."""
        self.served_by[p.engine] = self.served_by.get(p.engine, 0) + 1
        self.torch_free += p.torch_loaded is False

    def waited(self, ms: float) -> None:
        self.debounce["waited"] += 1
        self.debounce_ms.append(ms)


@dataclass
class Speculation:
    prefetch_used: int = 0  # prefetched answers that reached the user
    accepts: int = 0
    dismisses: int = 0
    accepts_by: dict[str, int] = field(default_factory=dict)  # "command" (tabd.accept) or "edit" (seen in didChange)
    branches: dict[str, int] = field(default_factory=dict)  # prefetches started per branch ("all", "all.word", ...)

    def prefetch_started(self, branch: str) -> None:
        self.branches[branch] = self.branches.get(branch, 0) + 1

    def accepted(self, via: str | None = None) -> None:
        self.accepts += 1
        if via is not None:
            self.accepts_by[via] = self.accepts_by.get(via, 0) + 1
