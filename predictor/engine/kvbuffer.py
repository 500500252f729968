"""The KV cache both CPU engines write in place: one buffer per K and V, [layers, kv_heads, capacity, head_dim].

FastCache (model.py) holds torch tensors, NumpyCache (boot.py) numpy arrays; the
native step writes either through its data pointer. Only the allocation differs.
"""
from __future__ import annotations


class KVBuffer:
    """Keys and values for every layer in one buffer each, written in place; `length` positions are valid."""

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
        if needed <= self.capacity:
            return
        capacity = max(needed, self.capacity * 2)
        for name in ("k", "v"):
            old = getattr(self, name)
            new = self._empty(old, capacity)
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def nbytes(self) -> int:
        return 2 * self.k.nbytes  # k and v alike (torch tensors have .nbytes too)
