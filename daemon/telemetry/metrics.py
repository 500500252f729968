"""Prometheus metrics for tabd, fed by the same event dicts the daemon logs.

The core calls `Metrics.on_event(event)` for every log event (completion,
prefetch, accept, dismiss, cancel, error; see docs/ARCHITECTURE log format);
`start_http(host, port)` serves /metrics from this instance's own registry on
a background thread. Latencies are exported in seconds, the Prometheus base
unit; the log keeps milliseconds.

Wiring for `tabd serve --metrics HOST:PORT`:

    metrics = Metrics()
    host, port = options.parse_host_port(args.metrics, args.allow_remote, "--metrics")
    bound = metrics.start_http(host, port, allow_remote=args.allow_remote)
    events.add_sink(metrics.on_event)
"""
from __future__ import annotations

import math
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from tabd.daemon.runtime.options import is_loopback

# 0.1 ms .. 2 s: cache hits live in the first buckets, model calls in the last;
# 5 s keeps a slow CPU's model calls out of +Inf, where histogram_quantile cannot see.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.0, 5.0,
)
SOURCES = ("cache", "typed", "inflight", "model", "none")
HIT_SOURCES = ("cache", "typed", "inflight")
OUTCOMES = ("started", "finished", "cancelled", "preempted", "held")  # held: never started (engine_load.why_held)
PHASES = (("prefill", "prefill_tokens"), ("reused", "reused_tokens"), ("decode", "decode_tokens"))
MAX_DEPTH_LABEL = 16  # deeper speculation is reported as "16+": label sets stay small
MAX_FREE_LABELS = 20  # distinct cancel reasons / error places; the rest are "other"
LOG_VERSION = 1


def _count(x) -> int:
    if type(x) is int:
        return x if x > 0 else 0
    if type(x) is float and 0 < x < math.inf:
        return int(x)
    return 0


class Metrics:
    """tabd's Prometheus metrics in a registry of their own (no global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.latency = Histogram(
            "tabd_completion_latency_seconds", "Completion latency, request to answer, by answer source",
            ["source"], buckets=LATENCY_BUCKETS, registry=r,
        )
        self.completions = Counter("tabd_completions", "Completion requests answered, by source", ["source"], registry=r)
        self.hits = Counter(
            "tabd_cache_hits", "Completions served from speculation, by hit type and prefetch depth",
            ["type", "depth"], registry=r,
        )
        self.prefetches = Counter("tabd_prefetches", "Background prefetches, by outcome", ["outcome"], registry=r)
        self.tokens = Counter(
            "tabd_model_tokens", "Model tokens by phase (prefill computed, reused from KV prefix, decoded)",
            ["phase", "request"], registry=r,
        )
        self.queue_depth = Gauge("tabd_queue_depth", "Requests waiting for the model worker", registry=r)
        self.accepts = Counter("tabd_accepts", "Suggestions accepted", ["partial"], registry=r)
        self.accepted_chars = Counter("tabd_accepted_chars", "Characters inserted by accepting", registry=r)
        self.dismisses = Counter("tabd_dismisses", "Suggestions dismissed", registry=r)
        self.cancels = Counter("tabd_cancels", "Requests cancelled, by reason", ["reason"], registry=r)
        self.errors = Counter("tabd_errors", "Errors, by where they happened", ["where"], registry=r)
        self.skipped = Counter(
            "tabd_metrics_skipped_events", "Events not counted (future log version, malformed)", ["reason"], registry=r,
        )
        for s in SOURCES:  # export zeros from the start so rate() has a baseline
            self.latency.labels(source=s)
            self.completions.labels(source=s)
        for o in OUTCOMES:
            self.prefetches.labels(outcome=o)
        for phase, _ in PHASES:
            for req in ("foreground", "prefetch"):
                self.tokens.labels(phase=phase, request=req)
        self._free_labels: dict[str, set[str]] = {"reason": set(), "where": set()}
        self._lock = threading.Lock()
        self._server = None
        self._thread: threading.Thread | None = None

    # -- events ----------------------------------------------------------
    def on_event(self, event: dict) -> None:
        """Count one log event. Never raises: metrics must not break serving."""
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a bad event is counted, not propagated
            self.skipped.labels(reason="malformed").inc()

    def _on_event(self, ev: dict) -> None:
        v = ev.get("v", LOG_VERSION)
        if type(v) is int and v > LOG_VERSION:
            self.skipped.labels(reason="future_version").inc()
            return
        kind = ev.get("event")
        if kind == "completion":
            self._completion(ev)
        elif kind == "prefetch":
            self._prefetch(ev)
        elif kind == "accept":
            self.accepts.labels(partial="true" if ev.get("partial") else "false").inc()
            self.accepted_chars.inc(_count(ev.get("chars")))
        elif kind == "dismiss":
            self.dismisses.inc()
        elif kind == "cancel":
            self.cancels.labels(reason=self._free_label("reason", ev.get("reason"))).inc()
        elif kind == "error":
            self.errors.labels(where=self._free_label("where", ev.get("where"))).inc()
        else:
            self.skipped.labels(reason="unknown_event").inc()

    def _completion(self, ev: dict) -> None:
        source = ev.get("source")
        latency_ms = ev.get("latency_ms")
        if source not in SOURCES or not isinstance(latency_ms, (int, float)) or not 0 <= latency_ms < math.inf:
            self.skipped.labels(reason="malformed").inc()
            return
        self.completions.labels(source=source).inc()
        self.latency.labels(source=source).observe(latency_ms / 1000.0)
        if source in HIT_SOURCES:
            depth = _count(ev.get("depth"))
            label = str(depth) if depth < MAX_DEPTH_LABEL else f"{MAX_DEPTH_LABEL}+"
            self.hits.labels(type=source, depth=label).inc()
        elif source == "model":
            self._tokens(ev, "foreground")
        self._queue(ev)

    def _prefetch(self, ev: dict) -> None:
        outcome = ev.get("outcome")
        if outcome not in OUTCOMES:
            self.skipped.labels(reason="malformed").inc()
            return
        self.prefetches.labels(outcome=outcome).inc()
        if outcome == "finished":
            self._tokens(ev, "prefetch")
            self._queue(ev)

    def _tokens(self, ev: dict, request: str) -> None:
        for phase, field in PHASES:
            n = _count(ev.get(field))
            if n:
                self.tokens.labels(phase=phase, request=request).inc(n)

    def _queue(self, ev: dict) -> None:
        q = ev.get("queue_depth")
        if q is not None:
            self.queue_depth.set(_count(q))

    def _free_label(self, name: str, value) -> str:
        label = str(value)[:60] if value is not None else "unknown"
        with self._lock:
            seen = self._free_labels[name]
            if label in seen:
                return label
            if len(seen) >= MAX_FREE_LABELS:
                return "other"
            seen.add(label)
            return label

    # -- HTTP ------------------------------------------------------------
    def start_http(self, host: str = "127.0.0.1", port: int = 0, *, allow_remote: bool = False) -> int:
        """Serve /metrics on a daemon thread; returns the bound port (port 0 picks a free one)."""
        if not allow_remote and not is_loopback(host):
            raise ValueError(
                f"refusing to serve metrics on non-loopback address {host!r}: the endpoint has no "
                "authentication; use 127.0.0.1 or ::1, or pass allow_remote=True to expose it deliberately"
            )
        if self._server is not None:
            raise RuntimeError("metrics HTTP server already running")
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        return self._server.server_port

    def stop_http(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
