"""Generation as a few small functions over an explicit KV cache (the gpt-fast shape).

`prefill` runs the prompt tokens the cache does not hold yet; `decode_one_token`
runs one token; `decode_n_tokens` loops, asking the caller after every token
whether to go on. Greedy only: the same state always gives the same answer,
which is what lets the daemon cache answers by state.
"""
from __future__ import annotations

from typing import Callable

import torch

from tabd.predictor.engine.runner import Runner, greedy_p
from tabd.predictor.types import Interrupted

__all__ = ["Runner", "chunk_for", "decode_n_tokens", "decode_one_token", "forward_last", "greedy", "greedy_p", "prefill",
           "score_tokens"]


@torch.inference_mode()
def forward_last(model: Runner, ids: list[int], cache) -> torch.Tensor:
    """Logits at the last position after running `ids` on top of `cache`."""
    return model.forward_last(ids, cache)


PREFILL_CHUNK = 256  # tokens per prefill chunk at 0.5B parameters: the longest a foreground request waits
CHUNK_WORK = 256 * 500_000_000  # tokens x parameters per chunk (see chunk_for)


def chunk_for(parameters: int) -> int:
    """Prefill chunk for a model of this size: a power of two in [64, 2048] near CHUNK_WORK / parameters.

    Measured here (2 cores, loaded): at Qwen2.5-Coder-0.5B's shape a 1k-token prefill took 13.1 s whole,
    14.6 s in chunks of 512, 16.0 s in 256 (4.1 s each), 21.5 s in 128 and 31.9 s in 64 (small GEMMs run
    far below peak); the embedded 4M-parameter model loses 37% in chunks of 256 and nothing at 2048,
    where the whole prompt takes tens of ms. So chunks shrink as the model grows."""
    target = CHUNK_WORK / max(1, parameters)
    chunk = 64
    while chunk < 2048 and chunk * 2 <= target * 1.41:
        chunk *= 2
    return chunk


def prefill(
    model,
    ids: list[int],
    cache,
    chunk: int = PREFILL_CHUNK,
    should_stop: Callable[[], bool] | None = None,
    on_chunk: Callable[[list[int]], None] | None = None,
) -> torch.Tensor:
    """Run the uncached prompt tokens in chunks; logits after the last.

    Before each chunk, should_stop() may say stop (Interrupted): the chunks
    already run stay in the cache, and on_chunk(ids) was told of each, so the
    caller's token list matches the cache and the next request sharing the
    prefix starts from there. Chunks also keep a long prompt's attention bounded.
    """
    logits = None
    for i in range(0, len(ids), max(1, chunk)):
        if should_stop is not None and should_stop():
            raise Interrupted()
        piece = ids[i : i + chunk]
        logits = forward_last(model, piece, cache)
        if on_chunk is not None:
            on_chunk(piece)
    assert logits is not None, "prefill needs at least one token"
    return logits


def decode_one_token(model, token: int, cache) -> torch.Tensor:
    return forward_last(model, [token], cache)


def greedy(logits: torch.Tensor, allowed: torch.Tensor | None = None) -> int:
    return greedy_p(logits, allowed)[0]


@torch.inference_mode()
def score_tokens(model, logits: torch.Tensor, cache, tokens: list[int], min_joint: float,
                 first_allowed: torch.Tensor | None = None) -> list[float]:
    """The model's probability of each of `tokens` in turn (teacher-forced), feeding each into the cache.

    Stops once the joint probability of the tokens so far falls below min_joint:
    nothing after that point can be shown.
    """
    probs: list[float] = []
    joint = 1.0
    for i, token in enumerate(tokens):
        if i == 0 and first_allowed is not None:
            if not bool((first_allowed == token).any()):
                return probs
            sub = logits[first_allowed]
            p = float(torch.exp(logits[token] - torch.logsumexp(sub, 0)))
        else:
            p = float(torch.exp(logits[token] - torch.logsumexp(logits, 0)))
        probs.append(p)
        joint *= p
        if joint < min_joint or i == len(tokens) - 1:
            return probs
        logits = forward_last(model, [token], cache)
    return probs


def decode_n_tokens(
    model,
    logits: torch.Tensor,
    cache,
    n: int,
    go_on: Callable[[list[int]], bool],
    on_feed: Callable[[int], None],
    first_allowed: torch.Tensor | None = None,
    probs: list[float] | None = None,
) -> list[int]:
    """Greedy tokens after `logits`, until n tokens or go_on(tokens) is False.

    The last token chosen is not fed back (nobody needs its successor);
    on_feed(token) is told of every token that is, so the caller can keep
    the cache's token list in step with the cache. When `probs` is given,
    the model's probability of each chosen token is appended to it (what
    confidence gating cuts suggestions by).
    """
    tokens: list[int] = []
    token, p = greedy_p(logits, first_allowed)
    while True:
        tokens.append(token)
        if probs is not None:
            probs.append(p)
        if len(tokens) >= n or not go_on(tokens):
            return tokens
        next_token, p = model.decode_greedy(token, cache)  # the native step picks it without handing logits back
        on_feed(token)
        token = next_token
