"""The KV cache, one family as gpt-fast has one: keys and values of every layer in one buffer each,
[layers, kv_heads, capacity, head_dim], preallocated and written in place; `length` positions are valid.

Every runner's cache is one of these, so the slot pool (slots.py) cuts, copies and sizes any of them the same
way. Only the storage differs: TorchKV holds torch tensors (the torch+native, torch and transformers engines),
NumpyKV numpy arrays (the torch-free runner); the native step writes either through its data pointer. No torch
or numpy at import: each is imported by the variant that holds it.
"""
from __future__ import annotations


class KVCache:
    """The interface every runner's cache has; a variant supplies the buffers and `_empty`."""

    k: object
    v: object
    length: int

    def _empty(self, like, capacity: int):
        """An uninitialised buffer shaped as `like` but for `capacity` positions."""
        raise NotImplementedError

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def ensure(self, needed: int) -> None:
        """Room for `needed` positions (doubling, the valid ones copied over)."""
        if needed <= self.capacity:
            return
        capacity = max(needed, self.capacity * 2)
        for name in ("k", "v"):
            old = getattr(self, name)
            new = self._empty(old, capacity)
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def truncate(self, length: int) -> None:
        """Keep the keys and values of the first `length` positions only."""
        self.length = min(self.length, length)

    def copy_prefix(self, src: "KVCache", n: int) -> None:
        """This cache := the first n positions of `src` (a cache of the same kind)."""
        self.ensure(n)
        self.k[:, :, :n] = src.k[:, :, :n]
        self.v[:, :, :n] = src.v[:, :, :n]
        self.length = n

    def nbytes(self) -> int:
        """Bytes allocated (not just used): what the slot pool's max_kv_bytes bounds."""
        return self.k.nbytes + self.v.nbytes  # torch tensors have .nbytes too


class TorchKV(KVCache):
    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int, dtype, device) -> None:
        import torch

        self.k = torch.empty(layers, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.empty_like(self.k)
        self.length = 0

    @classmethod
    def over(cls, k, v, length: int) -> "TorchKV":
        """A cache over existing buffers (the torch-free runner's, as views: see swap.py)."""
        cache = cls.__new__(cls)
        cache.k, cache.v, cache.length = k, v, length
        return cache

    def _empty(self, like, capacity: int):
        return like.new_empty(like.shape[0], like.shape[1], capacity, like.shape[3])


class NumpyKV(KVCache):
    """fp32 numpy buffers, written in place by the native step (the torch-free runner's)."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int) -> None:
        import numpy as np

        self.k = np.empty((layers, kv_heads, capacity, head_dim), dtype=np.float32)
        self.v = np.empty_like(self.k)
        self.length = 0

    def _empty(self, like, capacity: int):
        import numpy as np

        return np.empty((like.shape[0], like.shape[1], capacity, like.shape[3]), dtype=like.dtype)
