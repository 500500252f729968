"""The runner seam: what generate.py runs a model through, and the adapter for transformers' own forward.

A runner gives logits after some ids on top of a KV cache, one greedy step,
and a fresh cache that can be cut back. FastLlama (model.py) is one;
TransformersRunner wraps a transformers causal LM as another, with our
in-place cache ("hf") or transformers' DynamicCache ("plain"); NativeRunner
(boot.py) is the torch-free one, whose logits are numpy arrays. generate.py and
local.py call these methods, never asking which runner they have, and the
helpers below take either kind of logits. No torch at import: the torch-free
runner's path must not load it.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


class KVCache(Protocol):
    def truncate(self, length: int) -> None:
        """Keep the keys and values of the first `length` tokens only."""


class Runner(Protocol):
    def forward_last(self, ids: list[int], cache: Any) -> torch.Tensor:
        """Logits at the last position after running `ids` on top of `cache`."""

    def decode_greedy(self, token: int, cache: Any) -> tuple[int, float]:
        """Feed `token`; the greedy next token and its probability."""

    def new_cache(self, capacity: int) -> KVCache:
        """An empty cache for up to `capacity` tokens."""

    def verify_logits(self, ids: list[int], cache: Any) -> torch.Tensor | None:
        """Feed a few tokens in one pass; the logits after each ([n, vocab], the numbers one step at a time
        gives), or None where the runner has no such pass (teacher-forced scoring then goes a token a pass)."""

    def verify(self, ids: list[int], cache: Any) -> list[tuple[int, float]] | None:
        """Feed a few tokens in one pass; the greedy choice and its probability after each, as one step at a
        time gives them, or None where the runner has no such pass (prompt-lookup drafts need it to stay
        greedy-exact)."""


def _is_torch(x) -> bool:
    return hasattr(x, "data_ptr")


def greedy_p(logits, allowed=None, banned=None) -> tuple[int, float]:
    """The greedy token and its probability (renormalised over `allowed` when the choice is restricted);
    logits and allowed are both torch tensors or both numpy arrays.

    `banned` (a list of ids) are never chosen, and their share is not renormalised away: the token
    picked instead keeps the probability the model gave it, so a gate on it sees how unsure the model was."""
    if banned and allowed is None:
        return _greedy_unbanned(logits, banned)
    if _is_torch(logits):
        import torch

        if allowed is not None:
            sub = logits[allowed]
            i = int(torch.argmax(sub))
            return int(allowed[i]), float(torch.exp(sub[i] - torch.logsumexp(sub, 0)))
        best = int(torch.argmax(logits))
        return best, float(torch.exp(logits[best] - torch.logsumexp(logits, 0)))
    pool = logits if allowed is None else logits[allowed]
    i = int(pool.argmax())
    return (i if allowed is None else int(allowed[i])), _np_p(pool, float(pool[i]))


def _greedy_unbanned(logits, banned: list[int]) -> tuple[int, float]:
    pool = logits.clone() if _is_torch(logits) else logits.copy()
    pool[banned] = float("-inf")
    best = int(pool.argmax())
    return best, token_p(logits, best)


def token_p(logits, token: int, allowed=None) -> float | None:
    """The probability of `token` (renormalised over `allowed`); None where `allowed` excludes it."""
    if allowed is not None and not bool((allowed == token).any()):
        return None
    pool = logits if allowed is None else logits[allowed]
    if _is_torch(logits):
        import torch

        return float(torch.exp(logits[token] - torch.logsumexp(pool, 0)))
    return _np_p(pool, float(logits[token]))


def _np_p(pool, value: float) -> float:
    """exp(value - logsumexp(pool)) for a numpy pool, summed in float64."""
    import numpy as np

    top = float(pool.max())
    return float(np.exp(value - top) / np.exp(pool.astype(np.float64) - top).sum())


def inference(fn):
    """fn(model, ...) under torch.inference_mode(), unless the model is the torch-free runner (numpy logits)."""
    @functools.wraps(fn)
    def wrapper(model, *args, **kwargs):
        if getattr(model, "array_kind", "torch") == "numpy":
            return fn(model, *args, **kwargs)
        import torch

        with torch.inference_mode():
            return fn(model, *args, **kwargs)

    return wrapper


class TransformersRunner:
    """A transformers causal LM as a Runner: its own forward, with the in-place cache or a DynamicCache."""

    def __init__(self, model: Any, in_place: bool = True) -> None:
        self.model = model
        self.in_place = in_place

    def forward_last(self, ids: list[int], cache: Any) -> torch.Tensor:
        import torch

        with torch.inference_mode():
            x = torch.tensor([ids], dtype=torch.long, device=self.model.device)
            out = self.model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
            return out.logits[0, -1]

    def decode_greedy(self, token: int, cache: Any) -> tuple[int, float]:
        return greedy_p(self.forward_last([token], cache))

    def verify(self, ids: list[int], cache: Any) -> None:
        return None  # no exact multi-token pass: decode one token at a time

    def verify_logits(self, ids: list[int], cache: Any) -> None:
        return None

    def new_cache(self, capacity: int) -> KVCache:
        if self.in_place:
            from tabd.predictor.engine.cache import InPlaceCache  # it imports transformers: only for this runner

            return InPlaceCache(self.model.config.num_hidden_layers, capacity)
        return _dynamic_cache(self.model.config)


def _dynamic_cache(config: Any) -> KVCache:
    """transformers' DynamicCache, with truncate() as crop() (which takes the number of tokens to drop, negated)."""
    from transformers import DynamicCache

    class TruncatingCache(DynamicCache):
        def truncate(self, length: int) -> None:
            drop = self.get_seq_length() - length
            if drop > 0:
                self.crop(-drop)

    return TruncatingCache(config=config)
