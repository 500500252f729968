"""The `tabd/stats` report and the completion log line: read from the service's collaborators and their own
counters (stats.py), changing none of them.

The keys are a contract (editors, replay, dashboards and tests read them):
extend, never rename. tests/unit/test_service.py holds their shape.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
from typing import Any, Iterable

from tabd.cache.state import short_key
from tabd.daemon.runtime import heap
from tabd.daemon.runtime.answer import Outcome
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.debounce import Debounce, Waits
from tabd.daemon.runtime.fields import engine_fields, prediction_fields
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.jobs import PromptReuse
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.priority import nice_of_thread
from tabd.daemon.runtime.request import Request
from tabd.daemon.runtime.scheduler import Scheduler
from tabd.daemon.runtime.speculator import Speculator
from tabd.daemon.runtime.stats import Answers, REUSE_KINDS
from tabd.daemon.runtime.workspace import Workspace
from tabd.predictor.types import Prediction


def rss_bytes() -> int:
    """This process's resident memory now (0 where /proc is not)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _share(reused: int, total: int) -> float:
    return round(reused / total, 4) if total else 0.0


def _p50(values: Iterable[float]) -> float:
    values = list(values)
    return round(statistics.median(values), 3) if values else 0.0


class Reporter:
    def __init__(self, config: Config, answers: Answers, model: Model, scheduler: Scheduler, memory: Memory,
                 computations: Computations, speculator: Speculator, debounce: Debounce, waits: Waits,
                 workspace: Workspace, handover: HandOver, warm_reuse: PromptReuse) -> None:
        self.config = config
        self.answers = answers
        self.computations = computations
        self.warm_reuse = warm_reuse
        self.model = model
        self.scheduler = scheduler
        self.memory = memory
        self.speculator = speculator
        self.debounce = debounce
        self.waits = waits
        self.workspace = workspace
        self.handover = handover

    def completion(self, req: Request, out: Outcome, latency: float) -> dict[str, Any]:
        """The completion event's fields for a request's answer."""
        p = out.prediction or Prediction("")
        computed = out.computed
        return {
            "id": req.id, "doc": req.doc, "version": req.version, "source": out.shown_source, "origin": out.source,
            "depth": out.depth, "latency_ms": round(latency, 3), "queue_ms": round(out.queue_ms, 3),
            "cache_ms": round(out.cache_ms, 4), **prediction_fields(p),
            "chars": len(out.text), "key": short_key(req.key) if req.key else "", "after_accept": req.after_accept,
            "debounce_ms": round(out.debounce_ms, 3), **({"debounce_why": out.debounce_why} if out.debounce_why else {}),
            "queue_depth": self.scheduler.depth(), "context_chunks": len(req.context.chunks),
            **(engine_fields(computed) if computed is not None else {}),
            **({"hidden": True} if out.hidden else {}),
            **({"reason": out.reason} if not out.text else {}),
            **({"from_key": short_key(out.from_key)} if out.from_key else {}),
            **({"error": out.error[:200]} if out.error else {}),
            **({"text": out.text} if self.config.log_text and out.text else {}),
            **(self.speculator.depth_fields(req.doc) if out.text else {}),
        }

    def stats_dict(self) -> dict[str, Any]:
        s = self.answers
        runs = self.computations
        aa = s.after_accept_requests
        backend = self.model.backend
        return {
            "sources": dict(s.sources),
            **self._speculation(),  # prefetch (with used, wasted_per_accept), accepts_by, speculation
            "after_accept": {
                "requests": aa,
                "from_cache": s.after_accept_from_cache,
                "hit_rate": round(s.after_accept_from_cache / aa, 4) if aa else 0.0,
                "p50_ms": _p50(s.after_accept_ms),
            },
            "latency_ms": {"p50": _p50(s.latency_ms)},
            "last": {"source": s.last_source, "latency_ms": round(s.last_latency_ms, 3), "depth": s.last_depth,
                     "debounce_ms": round(s.last_debounce_ms, 3), "reason": s.last_reason, "origin": s.last_origin},
            "refusals": dict(s.refusals),  # requests answered empty at once: excluded or disabled documents
            "debounce": {**self.debounce.summary(), **s.debounce, "p50_ms": _p50(s.debounce_ms),
                         "waiting": len(self.waits)},
            "model_calls": runs.request_runs.started + runs.prefetch_runs.started,  # every job the worker was given
            "requests_to_model": runs.request_runs.counts(preempted=False),
            "accepts": self.speculator.stats.accepts,
            "dismisses": self.speculator.stats.dismisses,
            "cache": {"entries": len(self.memory.cache), "bytes": self.memory.cache.bytes,
                      "bound_bytes": self.memory.cache.max_bytes},
            "kv_bytes": backend.kv_bytes() if backend is not None else 0,
            "queue_depth": self.scheduler.depth(),
            # background jobs (prefetches, warm-ups) that waited, by why: behind_requests, a request of the user's ran
            # on an engine without priorities (--parallel above 1)
            # prefetches held back: waiting behind the user's requests (engines without priorities), and not
            # started at all while a shared engine is loaded (engine_load.py), with how loaded it looks
            # and, on a shared engine, the partial branches (type-through answers a partial accept) and the Tab's
            # prefetch for a document whose suggestions are seldom taken whole (engine_load.why_held)
            "held_back": {"behind_requests": self.scheduler.held,
                          "engine_loaded": self.speculator.engine.held.get("engine_loaded", 0),
                          "partial_branch": self.speculator.engine.held.get("partial_branch", 0),
                          "unlikely": self.speculator.engine.held.get("unlikely", 0),
                          "engine_load": round(self.speculator.engine.ratio(), 2),
                          # how long a suggestion now stays on screen before its Tab's prefetch starts (shared engine)
                          "pause_ms": round(self.speculator.engine.pause_s() * 1000, 1)},
            # whether the engine runs a keystroke before prefetches (--remote-priority; false after vLLM refused it)
            "engine_priority": backend.orders_by_priority if backend is not None else None,
            # whether the engine's answers carry each token's probability, which --min-confidence gates by (a remote
            # engine: its latest answer; false where it refused OpenAI `logprobs`, null before an answer)
            "engine_confidence": backend.gives_confidence if backend is not None else None,
            "worker_faults": self.scheduler.faults,
            # the collector: off during the hand-over, and what lives as long as the daemon is frozen out of it
            "gc": {"enabled": gc.isenabled(), "freezes": heap.freezes},
            # OS priorities (nice) of the thread answering the editor and of the background ones (priority.py)
            "nice": {"lsp": nice_of_thread(threading.get_native_id()), "model": self.scheduler.nice,
                     **self.handover.nice_fields()},
            "model": self.model.model_id,
            "engine": backend.engine_name if backend is not None else None,
            "engine_why": backend.engine_why if backend is not None else None,  # why this engine (not the torch-free one)
            "torch_loaded": "torch" in sys.modules,  # the torch-free engine answers without importing it
            "served_by": dict(s.served_by),  # model answers (requests) per engine
            "torch_free_answers": s.torch_free,
            "hand_over": self.handover.summary(),
            "weights": backend.weights_why if backend is not None else None,  # the weights' format, and why
            "rss_bytes": rss_bytes(),
            "error": self.model.error,
            "context": {**self.workspace.stats_dict(), "last_tokens": runs.reuse.last_context_tokens},
            "prompt_reuse": {**{kind: _share(*self._reuse(kind)) for kind in REUSE_KINDS},
                             "last": round(runs.reuse.last_reuse, 4)},
        }

    def _reuse(self, kind: str) -> list[int]:
        return (self.warm_reuse if kind == "warmup" else self.computations.reuse).reuse[kind]

    def _speculation(self) -> dict[str, Any]:
        s = self.speculator.stats
        prefetch = self.computations.prefetch_runs
        used = s.prefetch_used
        return {
            "prefetch": {**prefetch.counts(), "used": used,
                         # prefetches whose answer the user never saw, per suggestion accepted
                         "wasted_per_accept": round((prefetch.started - used) / s.accepts, 3) if s.accepts else None},
            "accepts_by": dict(s.accepts_by),
            "speculation": {**self.speculator.policy_summary(),
                            # "all_word": the accepts from the user's state, joined by _ (JSON keys clients can map)
                            "branches": {k.replace(".", "_"): v for k, v in s.branches.items()}},
        }
