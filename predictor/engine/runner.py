"""The runner seam: what generate.py runs a model through, and the adapter for transformers' own forward.

A runner gives logits after some ids on top of a KV cache (kvcache.py, one
family for all), one greedy step, and a fresh cache. FastLlama (model.py) is
one; TransformersRunner wraps a transformers causal LM as another, writing the
same TorchKV through transformers' Cache interface; TorchFreeRunner (boot.py)
is the torch-free one, whose logits are numpy arrays. generate.py and local.py
call these methods, never asking which runner they have, and the helpers below
take either kind of logits. No torch at import: the torch-free runner's path
must not load it.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

from tabd.predictor.engine.kvcache import KVCache

if TYPE_CHECKING:
    import torch


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
    """A transformers causal LM as a Runner: its own forward, over a TorchKV seen as transformers' Cache."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def forward_last(self, ids: list[int], cache: Any) -> torch.Tensor:
        import torch

        from tabd.predictor.engine.transformers_cache import TransformersCache  # it imports transformers

        with torch.inference_mode():
            x = torch.tensor([ids], dtype=torch.long, device=self.model.device)
            out = self.model(input_ids=x, cache=TransformersCache(cache), use_cache=True, logits_to_keep=1)
            cache.length += len(ids)  # every layer wrote at the old length
            return out.logits[0, -1]

    def decode_greedy(self, token: int, cache: Any) -> tuple[int, float]:
        return greedy_p(self.forward_last([token], cache))

    def verify(self, ids: list[int], cache: Any) -> None:
        return None  # no exact multi-token pass: decode one token at a time

    def verify_logits(self, ids: list[int], cache: Any) -> None:
        return None

    def new_cache(self, capacity: int) -> KVCache:
        from tabd.predictor.engine.kvcache import TorchKV

        cfg = self.model.config
        heads = cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        return TorchKV(cfg.num_hidden_layers, kv_heads, head_dim, capacity, self.model.dtype, self.model.device)
