"""The service's counters (Stats) and the `tabd/stats` report built from them (a mixin of CompletionService).

The service (daemon/runtime/service.py) owns the state read here: stats, cache,
backend, scheduler, workspace, debounce.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
from collections import deque
from dataclasses import dataclass, field

from tabd.daemon.runtime.priority import nice_of_thread

SOURCES = ("cache", "typed", "inflight", "model", "none")


@dataclass
class Stats:
    sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    prefetch: dict[str, int] = field(default_factory=lambda: {"started": 0, "finished": 0, "cancelled": 0, "preempted": 0})
    after_accept_requests: int = 0
    after_accept_from_cache: int = 0
    after_accept_ms: deque = field(default_factory=lambda: deque(maxlen=1000))
    latency_ms: deque = field(default_factory=lambda: deque(maxlen=1000))
    model: dict[str, int] = field(default_factory=lambda: {"started": 0, "finished": 0, "cancelled": 0})
    accepts: int = 0
    dismisses: int = 0
    last_source: str = ""
    last_latency_ms: float = 0.0
    last_depth: int = 0  # the speculation depth that computed the last answer (0: the request itself)
    last_debounce_ms: float = 0.0  # what the last answer waited before the model (0: it came from memory)
    accepts_by: dict[str, int] = field(default_factory=dict)  # "command" (tabd.accept) or "edit" (seen in didChange)
    branches: dict[str, int] = field(default_factory=dict)  # prefetches started per branch ("all", "all.word", ...)
    # prompt tokens [reused, total] per kind of model run: what share of each prompt the kept KV covered
    reuse: dict[str, list[int]] = field(default_factory=lambda: {"request": [0, 0], "prefetch": [0, 0], "warmup": [0, 0]})
    last_context_tokens: int = 0
    last_reuse: float = 0.0
    # requests that waited out a debounce, and those a newer keystroke ended during it (they never reach the model)
    debounce: dict[str, int] = field(default_factory=lambda: {"waited": 0, "superseded": 0})
    debounce_ms: deque = field(default_factory=lambda: deque(maxlen=1000))  # the waits, for their median
    served_by: dict[str, int] = field(default_factory=dict)  # model answers per engine ("native", "fast", ...)
    torch_free: int = 0  # model answers computed before torch was imported


def rss_bytes() -> int:
    """This process's resident memory now (0 where /proc is not)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _p50(values) -> float:
    return round(statistics.median(values), 3) if values else 0.0


class Reporting:
    def _engine_fields(self, p) -> dict:
        """Count a model answer by the engine that computed it (and whether torch was loaded then); the log's
        engine fields. The first one also tells a torch-free start's hand-over that the daemon has answered."""
        self.stats.served_by[p.engine] = self.stats.served_by.get(p.engine, 0) + 1
        self.stats.torch_free += p.torch_loaded is False
        if self.handover is not None:
            self.handover.answered()
        return {"engine": p.engine, "torch_loaded": p.torch_loaded} if p.engine else {}

    def stats_dict(self) -> dict:
        from tabd.daemon.runtime import service  # loaded (it imports this module): its freeze count

        s = self.stats
        aa = s.after_accept_requests
        return {
            "sources": dict(s.sources),
            **self.speculation_stats(),  # prefetch (with used, wasted_per_accept), accepts_by, speculation
            "after_accept": {
                "requests": aa,
                "from_cache": s.after_accept_from_cache,
                "hit_rate": round(s.after_accept_from_cache / aa, 4) if aa else 0.0,
                "p50_ms": _p50(s.after_accept_ms),
            },
            "latency_ms": {"p50": _p50(s.latency_ms)},
            "last": {"source": s.last_source, "latency_ms": round(s.last_latency_ms, 3), "depth": s.last_depth,
                     "debounce_ms": round(s.last_debounce_ms, 3)},
            "debounce": {**self.debounce.summary(), **s.debounce, "p50_ms": _p50(s.debounce_ms),
                         "waiting": len(self.waits)},
            "model_calls": s.model["started"] + s.prefetch["started"],  # every job the model worker was given
            "requests_to_model": dict(s.model),
            "accepts": s.accepts,
            "dismisses": s.dismisses,
            "cache": {"entries": len(self.cache), "bytes": self.cache.bytes, "bound_bytes": self.cache.max_bytes},
            "kv_bytes": self.backend.kv_bytes() if self.backend is not None else 0,
            "queue_depth": self.scheduler.depth(),
            "worker_faults": self.scheduler.faults,
            # the collector: off during the hand-over, and what lives as long as the daemon is frozen out of it
            "gc": {"enabled": gc.isenabled(), "freezes": service.freezes},
            # OS priorities (nice) of the thread answering the editor and of the background ones (priority.py)
            "nice": {"lsp": nice_of_thread(threading.get_native_id()), "model": self.scheduler.nice,
                     **({"hand_over": self.handover.nice} if self.handover is not None else {})},
            "model": self.model_id,
            "engine": self.backend.engine_name if self.backend is not None else None,
            "engine_why": getattr(self.backend, "engine_why", None),  # why this engine (why not the torch-free one)
            "torch_loaded": "torch" in sys.modules,  # the torch-free engine answers without importing it
            "served_by": dict(s.served_by),  # model answers (requests) per engine
            "torch_free_answers": s.torch_free,
            "hand_over": self.handover.summary() if self.handover is not None else {"state": "off"},
            "weights": getattr(self.backend, "weights_why", None),  # the format the weights are held in, and why
            "rss_bytes": rss_bytes(),
            "error": self.load_error,
            "context": {**self.workspace.stats_dict(), "last_tokens": s.last_context_tokens},
            "prompt_reuse": {**{kind: round(r / t, 4) if t else 0.0 for kind, (r, t) in s.reuse.items()},
                             "last": round(s.last_reuse, 4)},
        }

