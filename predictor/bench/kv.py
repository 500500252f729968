"""`tabd bench kv`: what keeping the KV cache buys, measured side by side in one run.

On the default model at a 2048-token context: a request computed from scratch
(prefill the whole prompt, then decode) against the same request a keystroke
later with the cache cut back to the common prefix (prefill one token, then
decode). Rounds alternate so machine noise hits both alike; medians are quoted.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tabd.predictor.types import GenSettings, Query

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("bench kv")
    g.add_argument("--kv-rounds", type=int, default=7, help="alternating rounds (medians; default 7)")
    g.add_argument("--kv-context", type=int, default=2048, help="context tokens (default 2048)")
    g.add_argument("--kv-decode", type=int, default=16, help="tokens decoded per request (default 16)")


def _decode(model, logits, cache, n: int) -> list[int]:
    from tabd.predictor.engine import generate  # torch: only when the section runs, not for `tabd bench --help`

    return generate.decode_n_tokens(model, logits, cache, generate.Rule(n)).tokens


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def measure(backend, context: int, decode: int, rounds: int) -> dict:
    from tabd.predictor.engine import generate

    model = backend.runner
    layers = backend.model.config.num_hidden_layers
    text = "".join(p.read_text() for p in sorted(SAMPLES.glob("*.py"))) or "x = 1\n"
    ids = backend.encode(text)
    prompt_len = context - decode
    while len(ids) < prompt_len + 1:
        ids = ids + ids
    prompt, later = ids[:prompt_len], ids[: prompt_len + 1]  # a keystroke later: one more token
    full_ttft, full_req, reuse_ttft, reuse_req = [], [], [], []
    warm = backend.pool.new_cache(context + 8)
    generate.prefill(model, prompt[:64], warm)
    for _ in range(rounds):
        cache = backend.pool.new_cache(context + 8)
        t0 = time.perf_counter()
        logits = generate.prefill(model, later, cache)
        generate.greedy(logits)
        full_ttft.append(_ms(t0))
        _decode(model, logits, cache, decode)
        full_req.append(_ms(t0))

        cache = backend.pool.new_cache(context + 8)
        _decode(model, generate.prefill(model, prompt, cache), cache, decode)  # what the last request left behind
        t0 = time.perf_counter()
        cache.truncate(len(prompt))  # cut back to the common prefix
        logits = generate.prefill(model, later[-1:], cache)
        generate.greedy(logits)
        reuse_ttft.append(_ms(t0))
        _decode(model, logits, cache, decode)
        reuse_req.append(_ms(t0))
    med = statistics.median
    return {
        "full_prefill_ms": round(med(full_ttft), 2),
        "reuse_first_token_ms": round(med(reuse_ttft), 2),
        "ttft_speedup": round(med(full_ttft) / med(reuse_ttft), 1),
        "full_request_ms": round(med(full_req), 2),
        "reuse_request_ms": round(med(reuse_req), 2),
        "request_speedup": round(med(full_req) / med(reuse_req), 2),
    }


def prefetch_fraction(backend) -> float:
    """Median share of prompt tokens reused by the request for the state after accepting a suggestion."""
    text = (SAMPLES / "inventory.py").read_text() if (SAMPLES / "inventory.py").exists() else ""
    fractions = []
    settings = GenSettings(max_new_tokens=48)
    lines = text.split("\n")
    for i in range(10, len(lines), max(1, len(lines) // 12)):
        cut = sum(len(x) + 1 for x in lines[:i]) + len(lines[i]) // 2
        prefix, suffix = text[:cut], text[cut:]
        first = backend.predict(Query(prefix, suffix, settings, slot_id="bench"))
        if not first.text:
            continue
        after = backend.predict(Query(prefix + first.text, suffix, settings, slot_id="bench"))
        fractions.append(after.reused_tokens / max(1, after.reused_tokens + after.prefill_tokens))
    return round(statistics.median(fractions), 4) if fractions else 0.0


def run_section(args: argparse.Namespace) -> dict:
    import torch

    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.backends.backend_settings import LocalSettings

    backend = LocalBackend(LocalSettings(args.model, device=args.device, threads=args.threads))
    context = min(args.kv_context, backend.context)
    with torch.inference_mode():
        figures = measure(backend, context, args.kv_decode, args.kv_rounds)
    return {
        "context_tokens": context,
        **figures,
        "prefetch_reused_fraction": prefetch_fraction(backend),
        "kv_bytes_per_token": backend.pool.kv_bytes_per_token,
        "threads": torch.get_num_threads(),
        "device": backend.placement.device,
        "dtype": backend.placement.dtype,
    }
