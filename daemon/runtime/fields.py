"""What a model run's Prediction puts in a log line, written once for every event that carries it.

The completion, prefetch and warmup events carry these fields under these
names (ARCHITECTURE.md, "Daemon log"; dashboards read them): a warm-up
decodes nothing, so it carries the prefill's fields only.
"""
from __future__ import annotations

from typing import Any

from tabd.daemon.runtime.stats import reuse_of  # a counter's figure (stats.py), written in log lines too
from tabd.predictor.types import Prediction

WARMUP = ("prefill_tokens", "reused_tokens", "prefill_ms", "context_tokens")


def prediction_fields(p: Prediction) -> dict[str, Any]:
    out = {"prefill_ms": round(p.prefill_ms, 3), "decode_ms": round(p.decode_ms, 3),
           "prefill_tokens": p.prefill_tokens, "reused_tokens": p.reused_tokens, "decode_tokens": p.decode_tokens,
           "context_tokens": p.context_tokens, "reuse": reuse_of(p)}
    if p.first_token_ms:  # a remote engine: the wait for its first token, what its load is read from
        out["first_token_ms"] = round(p.first_token_ms, 3)
    if p.window_chars:  # the prompt window the answer was computed on (short: a cold prompt over the prefill budget)
        out["window_chars"] = p.window_chars
    if p.preemptions:  # a newer request of another document ran first; it waited paused_ms behind it
        out["preemptions"], out["paused_ms"] = p.preemptions, round(p.paused_ms, 3)
    if p.wait_ms:  # a request's wait before its run (queue, work under way, pauses), taken from its prefill budget
        out["wait_ms"] = round(p.wait_ms, 3)
    return out


def warmup_fields(p: Prediction) -> dict[str, Any]:
    fields = prediction_fields(p)
    return {name: fields[name] for name in WARMUP}


def engine_fields(p: Prediction) -> dict[str, Any]:
    """The engine that computed a request's answer, and whether torch was loaded then (none where not told)."""
    return {"engine": p.engine, "torch_loaded": p.torch_loaded} if p.engine else {}
