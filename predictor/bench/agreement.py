"""Greedy agreement between two engines on the same prompts: how often a compact weight format picks fp32's token.

Teacher-forced: both engines are fed the reference engine's own greedy tokens, and each
position counts as agreeing when both would choose the same next token. So one early
disagreement does not drag every later token with it, and every position is compared.
"""
from __future__ import annotations

import torch

from tabd.predictor.engine import generate


@torch.inference_mode()
def agreement(reference, other, states: list[tuple[str, str]], tokens: int = 16) -> dict:
    """{"agree", "positions", "rate"} for two LocalBackends over (prefix, suffix) states."""
    agree = total = 0
    for prefix, suffix in states:
        ids = reference.layout(prefix, suffix, tokens).ids
        caches = [b.pool.new_cache(len(ids) + tokens + 8) for b in (reference, other)]
        logits = [generate.prefill(b.runner, ids, c) for b, c in zip((reference, other), caches)]
        for _ in range(tokens):
            want, got = int(torch.argmax(logits[0])), int(torch.argmax(logits[1]))
            agree += want == got
            total += 1
            logits = [generate.decode_one_token(b.runner, want, c) for b, c in zip((reference, other), caches)]
    return {"agree": agree, "positions": total, "rate": round(agree / max(1, total), 4)}
