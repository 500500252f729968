"""Generation as a few small functions over an explicit KV cache (the gpt-fast shape).

`prefill` runs the prompt tokens the cache does not hold yet; `decode_one_token`
runs one token; `decode_n_tokens` loops, asking the caller after every token
whether to go on. Greedy only: the same state always gives the same answer,
which is what lets the daemon cache answers by state.
"""
from __future__ import annotations

from typing import Callable

import torch


@torch.inference_mode()
def forward_last(model, ids: list[int], cache) -> torch.Tensor:
    """Logits at the last position after running `ids` on top of `cache`."""
    if hasattr(model, "forward_last"):  # the hand-written fast path
        return model.forward_last(ids, cache)
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    out = model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1]


def prefill(model, ids: list[int], cache, chunk: int = 2048) -> torch.Tensor:
    """Run the uncached prompt tokens, in chunks so a long prompt's attention stays bounded."""
    logits = None
    for i in range(0, len(ids), chunk):
        logits = forward_last(model, ids[i : i + chunk], cache)
    assert logits is not None, "prefill needs at least one token"
    return logits


def decode_one_token(model, token: int, cache) -> torch.Tensor:
    return forward_last(model, [token], cache)


def greedy(logits: torch.Tensor, allowed: torch.Tensor | None = None) -> int:
    if allowed is not None:
        return int(allowed[torch.argmax(logits[allowed])])
    return int(torch.argmax(logits))


def decode_n_tokens(
    model,
    logits: torch.Tensor,
    cache,
    n: int,
    go_on: Callable[[list[int]], bool],
    on_feed: Callable[[int], None],
    first_allowed: torch.Tensor | None = None,
) -> list[int]:
    """Greedy tokens after `logits`, until n tokens or go_on(tokens) is False.

    The last token chosen is not fed back (nobody needs its successor);
    on_feed(token) is told of every token that is, so the caller can keep
    the cache's token list in step with the cache.
    """
    tokens: list[int] = []
    token = greedy(logits, first_allowed)
    while True:
        tokens.append(token)
        if len(tokens) >= n or not go_on(tokens):
            return tokens
        if hasattr(model, "decode_greedy"):  # the fast path picks the token without handing logits back
            next_token = model.decode_greedy(token, cache)
        else:
            next_token = greedy(decode_one_token(model, token, cache))
        on_feed(token)
        token = next_token
